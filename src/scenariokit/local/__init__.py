"""Running scenario files on a developer's machine: the local runner, outcomes, JUnit XML.

``scenariokit run`` and the pytest plugin (:mod:`scenariokit.pytest_plugin`) use these without a server.
"""
