"""The benchmarks of ``benchmarks/run.py``, one module each (or a small related group), and the
context they share (``suite.context``). run.py lists them and runs them.

They are imported as ``suite.*`` by run.py, whose directory (benchmarks/) is on ``sys.path``
with the repository root: like run.py, they reuse the standalone benchmarks' functions
(``bench_http``, ``bench_labelled``, ...), the live-stack helpers (``live``), the report
(``report``) and the tests' support package (``tests.support``) as they are.
"""
