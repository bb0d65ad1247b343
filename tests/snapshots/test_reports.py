"""Every report format of every fixture is what it was when tests/snapshots/reports.json was written.

A change that alters a report on purpose updates the snapshot in the same commit
(``python tests/snapshots/report_snapshots.py --update``) and says in the commit message which reports changed and why.
"""

from __future__ import annotations

import json

import pytest

import report_snapshots as reports

pytestmark = pytest.mark.snapshot


def test_every_report_of_every_fixture_is_unchanged(monkeypatch):
    monkeypatch.chdir(reports.ROOT)
    want = json.loads(reports.SNAPSHOT.read_text())
    got = reports.digest_all(reports.inputs())
    assert sorted(got) == sorted(want), "fixture inputs added or removed: update the snapshot"
    changed = [f"{name} {fmt}" for name in sorted(want) for fmt in want[name] if got[name].get(fmt) != want[name][fmt]]
    assert not changed, (f"{len(changed)} reports changed (see one with `python tests/snapshots/report_snapshots.py --show "
                         f"INPUT FORMAT`): " + ", ".join(changed[:20]))
