"""Pool sizes follow the cores a process may use: the affinity mask and the cgroup's CPU quota."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from referee.server.cpus import cgroup_cpu_quota, usable_cpus


def _affinity() -> int:
    return len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("cpu_max", "quota"),
    [("max 100000", None), ("150000 100000", 1.5), ("50000 100000", 0.5), ("garbage", None)],
)
def test_cgroup_v2_quota(tmp_path: Path, cpu_max: str, quota: float | None) -> None:
    (tmp_path / "cpu.max").write_text(cpu_max + "\n")
    assert cgroup_cpu_quota(tmp_path) == quota


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("200000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_quota(tmp_path) == 2.0
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_quota(tmp_path) is None


def test_no_cgroup_files_means_no_quota(tmp_path: Path) -> None:
    assert cgroup_cpu_quota(tmp_path) is None
    assert usable_cpus(tmp_path) == _affinity()


def test_a_quota_below_the_affinity_caps_the_count_rounding_up(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("50000 100000\n")  # half a core: still one process
    assert usable_cpus(tmp_path) == 1
    (tmp_path / "cpu.max").write_text(f"{(_affinity() + 3) * 100000} 100000\n")  # above the mask: the mask
    assert usable_cpus(tmp_path) == _affinity()
