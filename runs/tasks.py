"""Tasks for django-q2 workers. Thin: they take ids and call runs.services."""

from runs import services


def run_chunk(run_id: int, response_ids: list[int]) -> None:
    services.execute_chunk(run_id, response_ids)


def recover_runs() -> int:
    return services.recover_stale_items()
