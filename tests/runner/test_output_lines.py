"""A worker's output read a chunk at a time splits into the lines a line-at-a-time reader would give, and
reaches the event loop in order.

The pool's reader threads take what a worker has written in one read and cut it into lines
(:func:`output_lines`), where they read a line at a time before: the lines, the cuts of an over-long
line and the end mark must come out exactly as ``readline(limit)`` gave them, however the output was
split into reads.
"""

from __future__ import annotations

import asyncio
import io
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from scenariokit.runner.parent.worker_handle import MAX_OUTPUT_LINE, LoopHandoff, output_lines
from scenariokit.runner.protocol import OUTPUT_END

LIMIT = 8

#: output of short and over-long lines, lines left open, end marks, and the bytes of a split character
pieces = st.lists(
    st.sampled_from([b"a", b"bc\n", b"\n", b"0123456789abc", b"\xc3", b"\xa9\n", OUTPUT_END, b"x" * LIMIT]),
    max_size=30,
)


def readline_lines(data: bytes, limit: int) -> list[bytes]:
    stream = io.BytesIO(data)
    return list(iter(lambda: stream.readline(limit), b""))


def chunked_lines(data: bytes, cuts: list[int], limit: int) -> list[bytes]:
    lines: list[bytes] = []
    left = b""
    start = 0
    for cut in [*sorted(cut % (len(data) + 1) for cut in cuts), len(data)]:
        got, left = output_lines(left + data[start:cut], limit=limit)
        lines += got
        start = max(start, cut)
    return lines + output_lines(left, final=True, limit=limit)[0]


@settings(max_examples=300, deadline=None)
@given(pieces, st.lists(st.integers(min_value=0, max_value=10_000), max_size=8))
def test_any_reads_of_the_output_give_the_lines_a_line_at_a_time_reader_gives(
    parts: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(parts)
    assert chunked_lines(data, cuts, LIMIT) == readline_lines(data, LIMIT)


def test_a_line_longer_than_the_limit_comes_in_cuts_of_the_limit_and_its_rest() -> None:
    data = b"y" * (2 * MAX_OUTPUT_LINE + 5) + b"\nshort\nopen"
    lines, left = output_lines(data)
    assert [len(line) for line in lines] == [MAX_OUTPUT_LINE, MAX_OUTPUT_LINE, 6, 6]
    assert left == b"open"
    assert output_lines(left, final=True) == ([b"open"], b"")


async def test_the_hand_off_to_the_loop_keeps_each_threads_order_and_survives_a_failing_call() -> None:
    loop = asyncio.get_running_loop()
    handoff = LoopHandoff(loop)
    seen: list[tuple[str, int]] = []
    errors: list[BaseException] = []
    loop.set_exception_handler(lambda _, context: errors.append(context["exception"]))

    def fail() -> None:
        raise ValueError("a callback that fails")

    def hand(tag: str) -> None:
        for number in range(500):
            handoff.call(seen.append, (tag, number))
            if tag == "stdout" and number == 250:
                handoff.call(fail)

    try:
        threads = [threading.Thread(target=hand, args=(tag,)) for tag in ("stdout", "stderr")]
        for thread in threads:
            thread.start()
        async with asyncio.timeout(10):
            while len(seen) < 1000:
                await asyncio.sleep(0.01)
        for thread in threads:
            thread.join()
    finally:
        loop.set_exception_handler(None)
    for tag in ("stdout", "stderr"):
        assert [number for name, number in seen if name == tag] == list(range(500))
    assert [str(error) for error in errors] == ["a callback that fails"]
