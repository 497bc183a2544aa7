"""Ending the support processes the tests start (the Kafka broker, nats-server): a SIGKILL, as a
crash would end one, or a SIGTERM with a deadline, SIGKILL after it. Both reap the process and
are no-ops when it is not running."""

from __future__ import annotations

import signal
import subprocess


def running(process: subprocess.Popen[bytes] | None) -> bool:
    return process is not None and process.poll() is None


def kill(process: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL and reap: whatever the process had not written is gone."""
    if process is not None and running(process):
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)


def stop(process: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    """SIGTERM and wait ``timeout_s`` for a clean exit; SIGKILL after that."""
    if process is not None and running(process):
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill(process)
