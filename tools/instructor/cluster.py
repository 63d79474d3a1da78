"""Where grading runs: a Dask cluster (dask.distributed), one task per submission
(tools/worker/task.py), one thread per worker.

    with client(scheduler=None, jobs=4) as dask:   # a local cluster of 4 worker processes
    with client("tcp://host:8786") as dask:        # a cluster already running

A scheduler's workers may be on any machine that has the course's repository and
environment and bubblewrap (docs/instructors.md, "More than one machine"): started there
with `make worker SCHEDULER=tcp://host:8786`, under Slurm or PBS by dask-jobqueue, on
Kubernetes by dask-kubernetes. Without a scheduler, a local cluster of `jobs` worker
processes on this machine, started for one autograde and stopped after: no set-up (its
connections in TLS, with credentials of its own).
"""

import contextlib
import logging

CONNECT_SECONDS = 30  # for a scheduler to answer, and for its first worker to join


def local(jobs, env=None, secure=True):
    """A local cluster (a context manager) of `jobs` worker processes of one thread each,
    without a memory limit of Dask's (each grading process has the course's,
    tools/sandboxed/limits.py) or a dashboard. secure: its connections in TLS with
    credentials made for it alone (another user of this machine cannot give it tasks, which
    would run as you); a test
    that hands its address to autograde, as SCHEDULER, passes False. Its scheduler's HTTP
    server listens on 127.0.0.1, on a free port (two clusters may run at once). Its workers
    never see the gradebook's URL (NBGRADER_DB_URL), nor hence its password; env: more
    variables of theirs."""
    from distributed import LocalCluster

    return LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, memory_limit=0,
                        dashboard_address=None, security=secure or None, host="127.0.0.1",
                        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                        silence_logs=logging.ERROR,
                        env={"NBGRADER_DB_URL": "", **(env or {})})


@contextlib.contextmanager
def client(scheduler=None, jobs=1):
    """A dask.distributed Client of the scheduler at that address, or of a local cluster of
    `jobs` workers (local). Exits with one message where the scheduler does not answer, or
    has no worker."""
    from distributed import Client

    if scheduler is None:
        with local(jobs) as cluster, Client(cluster) as dask:
            yield dask
        return
    try:
        dask = Client(scheduler, timeout=CONNECT_SECONDS)
    except OSError as error:
        raise SystemExit(f"autograde: cannot reach the Dask scheduler {scheduler}: {error}. "
                         "Start it (make scheduler, on its machine), or correct SCHEDULER"
                         ) from None
    with dask:
        try:
            dask.wait_for_workers(1, timeout=CONNECT_SECONDS)
        except TimeoutError:
            raise SystemExit(f"autograde: the Dask scheduler {scheduler} has no worker after "
                             f"{CONNECT_SECONDS} s: start some (make worker "
                             f"SCHEDULER={scheduler})") from None
        yield dask
