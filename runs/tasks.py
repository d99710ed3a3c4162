"""Tasks for django-q2 workers. Thin: they take ids and call runs.work (and runs.start, runs.records,
runs.pairs.llm_judge)."""

from runs import work as run_work


def run_chunk(run_id: int, response_ids: list[int]) -> None:
    run_work.execute_chunk(run_id, response_ids, top_up=True)


def make_items(run_id: int) -> None:
    """A large run's items, made outside the request that started it (runs.start.make_items)."""
    from runs import start as run_start

    run_start.make_items(run_id)


def reclaim_space() -> None:
    """Give a large delete's space back to the disk (SQLite: VACUUM; runs.work.reclaim_space)."""
    run_work.reclaim_space()


def recover_runs() -> int:
    return run_work.recover_stale_items()


def judge_pairs(judging_id: int) -> None:
    from runs.pairs import llm_judge  # the Pairs page's views: not for every run's worker to import

    llm_judge.run_judging(judging_id)


def look_into(run_id: int) -> None:
    """After a run finishes: the similarity of its answers and its summary, each when its model is configured."""
    from runs import insight  # the insight's modules: only for the workers that do it

    insight.after_finish(run_id)


def insight_part(run_id: int, what: str) -> None:
    """A similarity or a summary asked for from the run page."""
    from runs import insight

    insight.make_part(run_id, what)
