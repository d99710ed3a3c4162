import sys

# httpx's package imports its command-line client (click, and rich and pygments where installed: 0.1-0.3 s of
# every process's start, tests/bench/bench_cli_run.py) unless that import fails, which it then handles. evalsite
# never uses that client: every process of the site (manage.py, the web and task workers) is spared it.
sys.modules.setdefault("httpx._main", None)
