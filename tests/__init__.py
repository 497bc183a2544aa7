"""Sift's tests (a regular package, so that no installed package named ``tests`` shadows it)."""
