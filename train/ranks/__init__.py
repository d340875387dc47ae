"""One run across ranks (dist=ddp, dist=fsdp), in three parts.

- start.py starts the ranks, each in the run's process group.
- measure.py measures one rank: its steps, as a RankResult.
- combine.py combines the ranks' results into the run's records.
"""
