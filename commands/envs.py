"""`perfsweep envs`: list the environments built for package-version axes, or remove them."""

import argparse


def show_envs(args: argparse.Namespace) -> int:
    """The cached environments (launcher/envs.py), or, with --prune, remove them."""
    import datetime
    from pathlib import Path

    from perfsweep.launcher import envs

    cache = Path(args.dir).expanduser() if args.dir else envs.default_dir()
    if args.prune:
        removed = envs.prune(cache, args.unused_days)
        print(f"{cache}: removed {len(removed)} environments, {sum(env.own_mb for env in removed):.0f} MB freed")
        return 0
    listed = envs.cached(cache)
    print(f"{cache}: {len(listed)} environments, {sum(env.own_mb for env in listed):.0f} MB their own")
    for env in listed:
        used = datetime.datetime.fromtimestamp(env.last_used).strftime("%Y-%m-%d %H:%M")
        sizes = f"{env.size_mb:.0f} MB ({env.own_mb:.0f} MB its own)"
        print(f"{env.name}  {env.requested}  {sizes}  built {env.built_at}  last used {used}")
    return 0
