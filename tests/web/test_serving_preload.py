"""`make run`'s web processes start with the pages loaded: gunicorn loads evalsite.asgi in its master
(``preload_app``) and forks each web process from it, so what that module imports, every process has before
its first request (evalsite/asgi.py, ``load_the_pages``)."""

import os
import runpy
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_gunicorn_loads_the_app_in_its_master_before_forking():
    config = runpy.run_path(str(REPO / "evalsite" / "gunicorn.conf.py"))
    assert config["preload_app"] is True and config["wsgi_app"] == "evalsite.asgi:application"


def test_loading_the_served_app_imports_every_view_and_the_statistics_the_pages_use(tmp_path):
    code = """
import sys
before = {"runs.views", "runs.pages", "blueprints.views", "runs.compare", "scipy.special"} & set(sys.modules)
import evalsite.asgi
after = [name for name in ("runs.views", "runs.pages", "blueprints.views", "runs.compare", "scipy.special")
         if name in sys.modules]
print(sorted(before), after)
"""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DATA_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[] ['runs.views', 'runs.pages', 'blueprints.views', 'runs.compare', 'scipy.special']"
