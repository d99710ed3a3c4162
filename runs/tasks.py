"""Tasks for django-q2 workers. Thin: they take ids and call runs.work (and runs.start, runs.records,
runs.pairs_judging)."""

from runs import work as run_work


def run_chunk(run_id: int, response_ids: list[int]) -> None:
    run_work.execute_chunk(run_id, response_ids, top_up=True)


def recover_runs() -> int:
    return run_work.recover_stale_items()


def judge_pairs(judging_id: int) -> None:
    from runs import pairs_judging  # the Pairs page's views: not for every run's worker to import

    pairs_judging.run_judging(judging_id)
