// A frontend's use of the client generated from /docs/openapi.json: openapi-typescript's types
// (api.ts, generated next to this file by the test; imported as ./api.js, as Node's ES modules name
// it) through openapi-fetch. Compiled with `tsc --strict` and then run against a live server by
// tests/api/test_generated_clients.py.
// Nothing here is cast: every answer is narrowed the way the document says it can be.
//
// One function per resource, called in order from main(). A new resource (revisions, audit) is one
// more function here and one more in round_trip.py, the Python client's same round trip.

import createClient from "openapi-fetch";
import type { components, paths } from "./api.js";

/** Node's command line (the test runs this file with node; no @types/node needed for one name). */
declare const process: { argv: string[] };

type Schemas = components["schemas"];
type Client = ReturnType<typeof createClient<paths>>;

/** What an openapi-fetch call answers: data on success, the problem document otherwise. */
interface Answer<T> {
    data?: T;
    error?: unknown;
    response: Response;
}

function must<T>(answer: Answer<T>, what: string): T {
    if (answer.data === undefined) {
        throw new Error(`${what}: ${answer.response.status} ${JSON.stringify(answer.error)}`);
    }
    return answer.data;
}

function check(condition: boolean, what: string): asserts condition {
    if (!condition) {
        throw new Error(`check failed: ${what}`);
    }
}

async function environments(client: Client): Promise<Schemas["Environment"][]> {
    const made: Schemas["Environment"][] = [];
    for (const name of ["staging", "production"]) {
        const body: Schemas["EnvironmentInput"] = {
            name,
            data: { url: "http://127.0.0.1:9" },
            browser: { device: "Pixel 7", viewport: { width: 390, height: 844 }, extraHTTPHeaders: { "X-Check": "1" } },
        };
        made.push(must(await client.POST("/api/v1/environments", { body }), "create environment"));
    }
    check(made[0].browser.device === "Pixel 7" && made[0].browser.viewport?.width === 390, "browser settings");
    const changed = must(
        await client.PATCH("/api/v1/environments/{id}", {
            params: { path: { id: made[0].id } },
            body: { description: "the one runs use" },
        }),
        "patch environment",
    );
    check(changed.description === "the one runs use", "PATCH changed the description");
    const page = must(
        await client.GET("/api/v1/environments", {
            params: { query: { page: 1, limit: 1, orderBy: "name", orderDir: "asc" } },
        }),
        "list environments",
    );
    check(page.total === 2 && page.items.length === 1, "one page of one of two environments");
    check(page.items[0].name === "production", "sorted by name");
    return made;
}

async function credentials(client: Client): Promise<Schemas["Credential"]> {
    const credential = must(
        await client.POST("/api/v1/credentials", { body: { name: "admin", username: "ada", secret: "s3cret" } }),
        "create credential",
    );
    check(credential.hasSecret, "the secret is stored, and not shown");
    const page = must(
        await client.GET("/api/v1/credentials", { params: { query: { orderBy: "createdAt", q: "adm" } } }),
        "list credentials",
    );
    check(page.items.some((item) => item.id === credential.id), "found by q");
    return credential;
}

async function devices(client: Client): Promise<void> {
    const found = must(await client.GET("/api/v1/devices"), "list devices");
    check(found.items.includes("Pixel 7") && found.total === found.items.length, "Playwright's device names");
}

async function snippets(client: Client): Promise<void> {
    const snippet = must(
        await client.POST("/api/v1/snippets", { body: { alias: "login", title: "Log in", code: "return 1" } }),
        "create snippet",
    );
    const changed = must(
        await client.PATCH("/api/v1/snippets/{id}", {
            params: { path: { id: snippet.id } },
            body: { title: "Log in as admin" },
        }),
        "patch snippet",
    );
    check(changed.title === "Log in as admin", "PATCH changed the title");
    const page = must(
        await client.GET("/api/v1/snippets", { params: { query: { orderBy: "alias", orderDir: "asc" } } }),
        "list snippets",
    );
    check(page.total === 1, "one snippet");
}

async function scenarios(
    client: Client,
    environment: Schemas["Environment"],
    credential: Schemas["Credential"],
): Promise<Schemas["Scenario"]> {
    const body: Schemas["ScenarioInput"] = {
        name: "checkout",
        environmentId: environment.id,
        steps: [{ title: "open", execCode: "await page.goto(helpers.getEnvUrl())" }],
        credentials: [{ credentialId: credential.id, alias: "admin" }],
    };
    const scenario = must(await client.POST("/api/v1/scenarios", { body }), "create scenario");
    const step = must(
        await client.POST("/api/v1/scenarios/{id}/steps", {
            params: { path: { id: scenario.id } },
            body: { title: "look", execCode: "log('looked')", timeoutSeconds: 5 },
        }),
        "add step",
    );
    check(step.order === 2, "a new step goes last");
    const changed = must(
        await client.PATCH("/api/v1/scenarios/{id}", {
            params: { path: { id: scenario.id } },
            body: { description: "buys one thing", timeoutSeconds: 60 },
        }),
        "patch scenario",
    );
    check(changed.steps.length === 2 && changed.timeoutSeconds === 60, "PATCH kept the steps");
    const page = must(
        await client.GET("/api/v1/scenarios", {
            params: { query: { page: 1, limit: 10, orderBy: "updatedAt", orderDir: "desc", q: "check" } },
        }),
        "list scenarios",
    );
    check(page.items[0].id === scenario.id, "found by q");
    return changed;
}

async function runs(
    client: Client,
    scenario: Schemas["Scenario"],
    environments: Schemas["Environment"][],
): Promise<void> {
    const single = must(
        await client.POST("/api/v1/run", { body: { scenarioId: scenario.id, environmentId: environments[0].id } }),
        "queue run",
    );
    // @ts-expect-error: the answer may be a batch, which has no `id`: narrow first
    void single.id;
    // the answer is a run or a batch: `runs` tells them apart, as the operation's description says
    check(!("runs" in single), "one environment queues one run");
    if ("runs" in single) return;
    check(single.batchId === null && single.status === "in_progress", "a single run, queued");
    check(single.environment !== null && single.environment.id === environments[0].id, "its environment");

    const batch = must(
        await client.POST("/api/v1/run", {
            body: { scenarioId: scenario.id, environmentIds: environments.map((e) => e.id) },
        }),
        "queue batch",
    );
    if (!("runs" in batch)) throw new Error("environmentIds queue a batch");
    check(batch.runs.length === 2, "one run per environment");
    const listed = must(
        await client.GET("/api/v1/run", {
            params: { query: { batchId: batch.batchId, orderBy: "createdAt", orderDir: "asc", limit: 50 } },
        }),
        "list the batch",
    );
    check(listed.total === 2, "the batch lists its runs");

    const cancelled = must(
        await client.POST("/api/v1/run/{id}/cancel", { params: { path: { id: single.id } } }),
        "cancel run",
    );
    // @ts-expect-error: a run's error is null until it fails
    void cancelled.error.kind;
    const error: Schemas["RunError"] | null = cancelled.error;
    check(error !== null && error.kind === "cancelled", "a cancelled run's error");
    const detail = must(
        await client.GET("/api/v1/run/{id}", {
            params: { path: { id: single.id }, query: { q: "cancel", page: 1, limit: 20 } },
        }),
        "read run",
    );
    check(detail.status === "fail" && detail.session === null, "no session was saved");
    check(detail.logs.page === 1 && detail.logs.limit === 20, "the log's page");
    const history = must(
        await client.GET("/api/v1/scenarios/{id}/runs", {
            params: { path: { id: scenario.id }, query: { orderBy: "status", status: "fail" } },
        }),
        "list the scenario's runs",
    );
    check(history.items.length === 1, "the one failed run");
}

async function schedulesAndSessions(client: Client, scenario: Schemas["Scenario"], environment: Schemas["Environment"]): Promise<void> {
    const schedule = must(
        await client.POST("/api/v1/schedules", {
            body: { scenarioId: scenario.id, environmentIds: [environment.id], intervalSeconds: 3600, enabled: false },
        }),
        "create schedule",
    );
    check(schedule.cron === null, "an interval, no cron");
    const page = must(
        await client.GET("/api/v1/schedules", { params: { query: { scenarioId: scenario.id, orderBy: "createdAt" } } }),
        "list schedules",
    );
    check(page.total === 1, "the schedule");
    const sessions = must(
        await client.GET("/api/v1/sessions", { params: { query: { page: 1, limit: 5, orderBy: "name" } } }),
        "list sessions",
    );
    check(sessions.total === 0, "no run saved a session");
}

/** Every write is in the audit log: the schedule made above, through REST, with no token name. */
async function audit(client: Client): Promise<void> {
    const page = must(
        await client.GET("/api/v1/audit", { params: { query: { resource: "schedule", limit: 5, orderBy: "at" } } }),
        "list the audit log",
    );
    check(page.total === 1 && page.items[0].action === "create", "the schedule's creation is audited");
    check(page.items[0].door === "rest" && page.items[0].tokenName === null, "through REST, without a token");
}

/** YAML operations are raw bodies: generators skip application/yaml, so plain fetch calls them. */
async function yamlRoundTrip(baseUrl: string, scenario: Schemas["Scenario"]): Promise<void> {
    const exported = await fetch(`${baseUrl}/api/v1/scenarios/${scenario.id}/export`);
    check(exported.ok && exported.headers.get("content-type")?.startsWith("application/yaml") === true, "export");
    const imported = await fetch(`${baseUrl}/api/v1/scenarios/import`, {
        method: "POST",
        headers: { "Content-Type": "application/yaml" },
        body: await exported.text(),
    });
    const report: Schemas["ImportReport"] = await imported.json();
    check(imported.ok && report.counts.updated === 1, "the import overwrote the scenario");
}

async function main(baseUrl: string): Promise<void> {
    const client = createClient<paths>({ baseUrl });
    const [staging, production] = await environments(client);
    const credential = await credentials(client);
    await devices(client);
    await snippets(client);
    const scenario = await scenarios(client, staging, credential);
    await runs(client, scenario, [staging, production]);
    await schedulesAndSessions(client, scenario, staging);
    await audit(client);
    await yamlRoundTrip(baseUrl, scenario);
    console.log("round trip passed");
}

await main(process.argv[2]);
