"""`simrun init`'s install line: from where this simrun came (PEP 610's direct_url.json), never a
version no index has (tests/test_ci_workflow.py runs the line from a git URL for real)."""

from __future__ import annotations

import json
import shlex

import pytest
import yaml

from simrun.simulator import _scaffold as S


class Dist:
    def __init__(self, files: dict[str, str]) -> None:
        self.files, self.version = files, "0.1.0"

    def read_text(self, name: str) -> str | None:
        return self.files.get(name)


@pytest.mark.parametrize(("files", "requirement"), [
    ({"INSTALLER": "pip\n"}, "simrun==0.1.0"),                                     # from an index
    ({"INSTALLER": "pip", "direct_url.json": json.dumps({
        "url": "https://github.com/acme/simrun", "vcs_info": {"vcs": "git", "commit_id": "ab" * 20}})},
     f"simrun @ git+https://github.com/acme/simrun@{'ab' * 20}"),
    ({"INSTALLER": "pip", "direct_url.json": json.dumps({    # a repository on this machine: every pip's form
        "url": "file:///srv/simrun", "vcs_info": {"vcs": "git", "commit_id": "cd" * 20}})},
     f"simrun @ git+file://localhost/srv/simrun@{'cd' * 20}"),
    ({"INSTALLER": "pip", "direct_url.json": json.dumps({
        "url": "https://files.example/simrun-0.1.0-py3-none-any.whl", "archive_info": {}})},
     "simrun @ https://files.example/simrun-0.1.0-py3-none-any.whl"),
    ({"INSTALLER": "pip", "direct_url.json": json.dumps({"url": "file:///home/me/simrun-0.1.0-py3-none-any.whl",
                                                          "archive_info": {}})}, None),      # a local wheel
    ({"INSTALLER": "pip", "direct_url.json": json.dumps({"url": "file:///home/me/simrun",
                                                          "dir_info": {"editable": True}})}, None),   # a folder
    ({}, None),                                                          # a source tree's egg-info
])
def test_the_install_line_is_where_simrun_came_from_or_a_step_to_fill_in(monkeypatch, files, requirement):
    monkeypatch.setattr(S.metadata, "distribution", lambda name: Dist(files))
    install = S.install_spec()
    assert install.requirement == requirement
    workflow = S.WORKFLOW.replace("@INSTALL@", S.install_step(install))
    steps = yaml.safe_load(workflow)["jobs"]["simrun"]["steps"]
    step = next(s for s in steps if s.get("name") == "Install simrun")
    if requirement is None:
        # Stops the job and says what to fill in, naming where this simrun came from.
        assert "exit 1" in step["run"] and "fill in how CI installs simrun" in step["run"]
        assert "FILL IN" in workflow and install.where in workflow
        assert "simrun==" not in workflow
    else:
        assert shlex.split(step["run"]) == ["pip", "install", requirement]


def test_a_requirement_given_by_hand_cannot_end_the_yaml_value_or_the_command():
    hostile = 'simrun==1.0 # pinned: "$(touch pwned)"\nrun: evil'
    workflow = S.WORKFLOW.replace("@INSTALL@", S.install_step(S.Install(hostile)))
    steps = yaml.safe_load(workflow)["jobs"]["simrun"]["steps"]
    step = next(s for s in steps if s.get("name") == "Install simrun")
    assert set(step) == {"name", "run"}
    assert shlex.split(step["run"]) == ["pip", "install", 'simrun==1.0 # pinned: "$(touch pwned)" run: evil']
