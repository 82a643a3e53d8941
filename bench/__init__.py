"""waypost's benchmarks: each figure beside its baselines, measured in the same run.

Run `python -m bench` (full, under 5 minutes on 2 cores) or `python -m bench --quick`
(under a minute). Needs the bench extra for the LangGraph baseline:
`pip install -e '.[bench]'`.
"""
