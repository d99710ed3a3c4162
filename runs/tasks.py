"""Tasks for django-q2 workers. Thin: they take ids and call runs.work (and runs.start, runs.records)."""

from runs import work as run_work


def run_chunk(run_id: int, response_ids: list[int]) -> None:
    run_work.execute_chunk(run_id, response_ids, top_up=True)


def recover_runs() -> int:
    return run_work.recover_stale_items()
