"""CSP-DAG synthesis: random KernelBench-format programs over the operator vocabulary.

Pipeline (one module each): ``structure`` draws and wires the DAG (ranks only); ``solve`` sizes
it with one CP-SAT model (randomised, seeded search); ``render`` writes the source;
``execute`` runs it and refuses constant outputs; ``canon`` gives the canonical form for
deduplication; ``generate`` runs it all in parallel and writes ``programs.jsonl`` and
``manifest.json``; ``coverage`` computes the statistics. Settings live in ``config``.

Entry points: ``generate.generate(n, ks, seed, bounds)``, ``generate.make_program(...)`` and
the ``drtriton-train synth`` command.
"""
