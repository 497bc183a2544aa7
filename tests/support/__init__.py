"""What the tests share: harnesses of real processes, request helpers, data loaders.

Test modules import from here, never from one another.
"""
