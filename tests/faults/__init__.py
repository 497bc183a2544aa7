"""Fault tests: real service processes and real redis-servers, broken on purpose."""
