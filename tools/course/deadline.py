"""A time bound on work that runs no student code but may be long on what a student sent:
nbgrader's autograde of a submission (tools/worker/task.py, in a grading worker's thread)
and its generate_feedback of a page (tools/instructor/feedback.py, in nbgrader's process).
Past its seconds, TimeUp is raised in the thread that does the work, at its next Python
instruction (CPython's PyThreadState_SetAsyncExc, from a timer's thread): nbgrader is
Python, and a long step of it in C (a JSON parse, a regular expression) is one of a file
bounded before (tools/course/bounds.py: its bytes and cells), so it ends soon after.

TimeUp is a BaseException, not an Exception: nbgrader catches every Exception of a
submission, logs it and goes on with the next, which would leave the work running.
Another process is not needed (and a worker's nbgrader is imported once: 2 s a task).
"""

import contextlib
import ctypes
import threading


class TimeUp(BaseException):
    """Work ran past its deadline (raised in its thread by `deadline`)."""


def _raise_in(thread, kind):
    """kind raised in the thread (ident) at its next Python instruction; None: what was
    pending there and not yet raised is dropped."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread),
                                               ctypes.py_object(kind) if kind else None)


@contextlib.contextmanager
def deadline(seconds):
    """The block may run seconds (None or 0: no bound); past them, TimeUp is raised in
    it. A TimeUp not yet raised when the block ends (it ended in time, at the last
    moment) is dropped: none is raised after the block."""
    if not seconds:
        yield
        return
    thread, lock, inside = threading.get_ident(), threading.Lock(), [True]

    def up():
        with lock:
            if inside[0]:
                _raise_in(thread, TimeUp)

    timer = threading.Timer(seconds, up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            inside[0] = False
            _raise_in(thread, None)
