"""A single-node SLURM cluster on this machine, from Debian's packages, for testing the SLURM workflow profile.

    apt-get install -y slurmctld slurmd munge          # Debian bookworm: SLURM 22.05, munge 0.5
    python -m tools.slurm_single_node check            # installed, and root? (exit status 1 and why if not)
    python -m tools.slurm_single_node start [DIR]      # prints SLURM_CONF=... to export; Ctrl-C cancels the
                                                       # jobs and stops the daemons it started

Everything lives under ``DIR`` (default: a new temporary folder): the munge key and socket, ``slurm.conf``, the
controller's state, the spool, logs and pid files (the client commands find the cluster through ``SLURM_CONF``,
and ``AuthInfo`` in ``slurm.conf`` names the munge socket). The one exception is a link at
``/etc/slurm/slurm.conf`` (``DEFAULT_CONF`` below: the plug-in's job step drops ``SLURM_CONF``), made only where
no file is there and removed on stop.
The daemons (``munged``, ``slurmctld``, ``slurmd``) run in the foreground as children of the process that started
them and are stopped by their process ids. They run as root (``SlurmUser=root``): ``slurmd`` must, to start jobs.

The configuration is the smallest one that runs jobs without systemd, cgroups or an accounting database:

* one node (this host: its CPU count and memory, as ``slurmd -C`` reports them) and one partition
  (``debug``, the default, no time limit);
* ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``: no cgroup plug-in (a container may have no
  writable cgroup tree, and ``slurmd`` does not run under systemd here);
* ``AccountingStorageType=accounting_storage/none``, no ``slurmdbd``: ``sacct`` then answers with an error
  ("Slurm accounting storage is disabled"). snakemake-executor-plugin-slurm polls job states with ``squeue``
  instead when told to (``--slurm-status-command squeue``), which it accepts when ``MinJobAge`` (how long a
  finished job stays visible to ``squeue``) is at least three status-check intervals; ``MinJobAge=300`` here.
  Its account guess (``sacct``) and check (``sacctmgr``) need accounting too: submit with
  ``--slurm-no-account``.

Used by ``tests/test_slurm_cluster.py``; :class:`SlurmUnavailable` says why a cluster cannot start here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The one path outside the cluster's folder: snakemake-executor-plugin-slurm-jobstep (0.6) starts each rule inside
# the SLURM job with `srun`, in an environment stripped of every SLURM_* variable but the job's identity, SLURM_CONF
# included; srun then reads the default /etc/slurm/slurm.conf (or a configless node's cache). A link to this
# cluster's slurm.conf is made there when no file is there, and removed by stop().
DEFAULT_CONF = Path("/etc/slurm/slurm.conf")
BINARIES = ("munged", "slurmctld", "slurmd", "sinfo", "squeue", "sbatch", "scancel", "scontrol")
PARTITION = "debug"


class SlurmUnavailable(RuntimeError):
    """A single-node cluster cannot start on this machine (the message says why)."""


def _which(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(p) for d in ("/usr/sbin", "/usr/bin") if (p := Path(d) / name).is_file()), None
    )


def missing_reason() -> str | None:
    """Why no cluster can start here (a missing binary, not root), or None."""
    absent = [b for b in BINARIES if _which(b) is None]
    if absent:
        return f"SLURM/munge not installed ({', '.join(absent)} missing): apt-get install -y slurmctld slurmd munge"
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs (this process is not root)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_hardware() -> dict[str, str]:
    """NodeName, CPUs, ... of this host as ``slurmd -C`` prints them (what slurmd will register)."""
    out = subprocess.run(
        [_which("slurmd") or "slurmd", "-C"], capture_output=True, text=True, check=True
    ).stdout
    first = out.splitlines()[0]
    return dict(kv.split("=", 1) for kv in first.split())


class SingleNodeSlurm:
    """A one-node SLURM under ``root``: :meth:`start`, :meth:`env` for the client commands, :meth:`stop`."""

    def __init__(self, root: str | Path | None = None, *, min_job_age: int = 300) -> None:
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="flb-slurm-"))
        self.min_job_age = min_job_age
        self.conf = self.root / "slurm.conf"
        self.procs: dict[str, subprocess.Popen] = {}
        self.linked_default = False

    # ------------------------------------------------------------------------------------------ config
    def env(self) -> dict[str, str]:
        """The variables the client commands (sinfo, sbatch, squeue, ...) need to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def _write_config(self) -> None:
        hw = _node_hardware()
        node = hw["NodeName"]
        for sub in ("munge", "state", "spool", "log", "run"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        key = self.root / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        mem = int(hw.get("RealMemory", "1000"))
        r = self.root
        lines = [
            "ClusterName=flbtest",
            f"SlurmctldHost={node}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"AuthInfo=socket={r / 'munge' / 'munge.socket.2'}",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'run' / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ReturnToService=2",
            f"MinJobAge={self.min_job_age}",
            "KillWait=5",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs={hw['CPUs']} Boards={hw.get('Boards', 1)} "
            f"SocketsPerBoard={hw.get('SocketsPerBoard', 1)} CoresPerSocket={hw.get('CoresPerSocket', hw['CPUs'])} "
            f"ThreadsPerCore={hw.get('ThreadsPerCore', 1)} RealMemory={mem} State=UNKNOWN",
            f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")
        self.node = node
        if DEFAULT_CONF.is_symlink() and not DEFAULT_CONF.exists():
            DEFAULT_CONF.unlink()  # a link a killed run left behind
        if DEFAULT_CONF.exists() or DEFAULT_CONF.is_symlink():
            raise SlurmUnavailable(
                f"{DEFAULT_CONF} exists (a SLURM is configured on this machine): not replaced"
            )
        DEFAULT_CONF.parent.mkdir(parents=True, exist_ok=True)
        DEFAULT_CONF.symlink_to(self.conf)
        self.linked_default = True

    # ------------------------------------------------------------------------------------------ daemons
    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")
        self.procs[name] = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **self.env()}, start_new_session=True,
        )  # fmt: skip
        log.close()

    def _check_alive(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                tail = ""
                for f in (self.root / "log").glob(f"{name}*"):
                    tail += f"\n--- {f.name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-15:])
                raise SlurmUnavailable(f"{name} exited with status {p.returncode} at start{tail}")

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """A SLURM client command against this cluster."""
        return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=timeout,
                              env={**os.environ, **self.env()})  # fmt: skip

    def node_state(self) -> str:
        proc = self.run("sinfo", "-h", "-N", "-o", "%T", check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    def start(self, timeout: float = 60) -> SingleNodeSlurm:
        """Start munged, slurmctld and slurmd and wait until the node is idle; :class:`SlurmUnavailable`
        (with the daemons' last log lines) when it does not get there."""
        if reason := missing_reason():
            raise SlurmUnavailable(reason)
        try:
            self._write_config()
            m = self.root / "munge"
            self._spawn("munged", [_which("munged"), "-F", "--force", f"--key-file={m / 'munge.key'}",
                                   f"--socket={m / 'munge.socket.2'}", f"--pid-file={m / 'munged.pid'}",
                                   f"--seed-file={m / 'munged.seed'}",
                                   f"--log-file={self.root / 'log' / 'munged.log'}"])  # fmt: skip
            deadline = time.monotonic() + timeout
            while not (m / "munge.socket.2").exists():
                self._check_alive()
                if time.monotonic() > deadline:
                    raise SlurmUnavailable("munged did not open its socket")
                time.sleep(0.1)
            self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
            self._spawn("slurmd", [_which("slurmd"), "-D", "-f", str(self.conf)])
            state = ""
            while state not in ("idle", "mixed", "allocated"):
                self._check_alive()
                if time.monotonic() > deadline:
                    raise SlurmUnavailable(f"the node is {state or 'not listed'} after {timeout:.0f} s, not idle"
                                           f" (logs: {self.root / 'log'})")  # fmt: skip
                time.sleep(0.5)
                state = self.node_state()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 30) -> None:
        """Cancel every job of this cluster, wait for them to end, then stop the daemons this object started
        (by their process ids, slurmd first)."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--user", str(os.geteuid()), check=False)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                q = self.run("squeue", "-h", "-o", "%i", check=False)
                if q.returncode != 0 or not q.stdout.strip():
                    break
                time.sleep(0.5)
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.pop(name, None)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if (
            self.linked_default
            and DEFAULT_CONF.is_symlink()
            and DEFAULT_CONF.resolve() == self.conf.resolve()
        ):
            DEFAULT_CONF.unlink()
            self.linked_default = False

    def __enter__(self) -> SingleNodeSlurm:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``start [DIR]``: start a cluster and keep it running until interrupted (Ctrl-C or SIGTERM stop it)."""
    ap = argparse.ArgumentParser(
        prog="python -m tools.slurm_single_node", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("command", choices=["start", "check"])
    ap.add_argument("dir", nargs="?", help="the cluster's folder (default: a new temporary folder)")
    args = ap.parse_args(argv)
    if args.command == "check":
        reason = missing_reason()
        print(reason or "ok: SLURM and munge are installed and this process is root")
        return 1 if reason else 0
    cluster = SingleNodeSlurm(args.dir)
    try:
        cluster.start()
    except SlurmUnavailable as err:
        print(f"slurm_single_node: {err}", file=sys.stderr)
        return 1
    print(json.dumps({"root": str(cluster.root), **cluster.env()}))
    print(
        f"export SLURM_CONF={cluster.conf}   # node {cluster.node} idle; Ctrl-C stops the cluster", flush=True
    )
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
