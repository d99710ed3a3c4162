"""Insight with receipts through its doors: the run page's findings, `manage.py findings`, `manage.py summarize`
(a writer on the fake server, and --check), the similarity button, and figures unchanged by any of it."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from runs import insight
from runs.compare import decisions
from runs.exports import run_to_json
from runs.models import RunInsight
from tests.web.run_support import (BAD, GOOD, candidate_rules, fake_llm, fake_llm_server,  # noqa: F401
                                         fake_provider, make_run)

pytestmark = pytest.mark.django_db(transaction=True)
MODELS = ("openai:cand-good", "openai:cand-bad", "openai:cand-twin")


def _run(fake):
    return make_run(fake, models=MODELS, extra_rules=candidate_rules("cand-twin", GOOD))


def test_the_run_page_loads_findings_that_name_the_should_not_points_met_and_the_twins(client, fake_provider):
    run = _run(fake_provider)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'hx-get="/runs/{run.pk}/insight"' in page
    section = client.get(f"/runs/{run.pk}/insight", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="finding-F1"' in section
    assert "should-not point forbids" in section and "openai:cand-bad" in section
    assert "gave the same answer, word for word" in section
    assert f"/runs/{run.pk}/responses/" in section  # each finding links the cells that prove it
    assert "Set <code>EVALSITE_SUMMARY_MODEL</code>" in section and "EVALSITE_EMBEDDINGS_MODEL" in section
    simple = client.get(f"/runs/{run.pk}/simple").content.decode()
    assert "The models, best first" in simple and 'id="finding-F1"' in simple


def test_findings_json_has_the_contracts_shape(fake_provider, tmp_path):
    run = _run(fake_provider)
    out = tmp_path / "findings.json"
    call_command("findings", str(run.pk), "--json", str(out))
    data = json.loads(out.read_text())
    assert set(data) == {"findings", "scanners", "similarity"} and data["similarity"] is None
    first = data["findings"][0]
    assert set(first) == {"id", "kind", "text", "value", "models", "prompts", "cells"} and first["id"] == "F1"
    variants = set(run.resolved_models) | {v for f in data["findings"] for v in f["models"]}
    for f in data["findings"]:
        assert all(len(c) == 2 and c[1] in variants for c in f["cells"])
    kinds = [f["kind"] for f in data["findings"]]
    assert "should_not" in kinds[:3] and "identical" in kinds[:3]


def test_a_refused_output_path_creates_nothing(fake_provider, tmp_path):
    run = _run(fake_provider)
    for bad, words in ((tmp_path / "missing" / "out.json", "does not exist"), (tmp_path, "is a folder")):
        with pytest.raises(CommandError, match=words) as refused:
            call_command("findings", str(run.pk), "--json", str(bad))
        assert refused.value.returncode == 2
    link = tmp_path / "link.json"
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link.symlink_to(target)
    with pytest.raises(CommandError, match="symbolic link"):
        call_command("summarize", str(run.pk), "--json", str(link))
    assert target.read_text() == "keep me" and not RunInsight.objects.filter(run=run).exists()


def test_summarize_check_reads_a_claims_file_by_the_rules(fake_provider, tmp_path):
    run = _run(fake_provider)
    made = insight.insight_of(run)
    variant = made.matrix.variants[0]
    mean = made.matrix.summaries[variant].mean
    claims = {"claims": [
        {"text": f"{variant} averages {mean:.2f}.", "values": [{"metric": "mean", "model": variant, "value": mean}]},
        {"text": f"{variant} averages {min(1, mean + 0.2):.2f}.",
         "values": [{"metric": "mean", "model": variant, "value": min(1, mean + 0.2)}]}]}
    given, out = tmp_path / "claims.json", tmp_path / "checked.json"
    given.write_text(json.dumps(claims))
    call_command("summarize", str(run.pk), "--check", str(given), "--json", str(out))
    data = json.loads(out.read_text())
    assert [c["ok"] for c in data["claims"]] == [True, False]
    assert data["claims"][1]["reason"].startswith("wrong number")
    assert f"{mean:.2f}]" in data["summary"] and "#variants" in data["summary"]
    assert not fake_provider.requests("writer")  # --check makes no call


def test_the_writer_sees_no_model_names_and_only_checked_claims_are_kept(fake_provider, tmp_path):
    writer_reply = json.dumps({"claims": [
        {"text": "Finding F1 is the one to read first.", "values": [], "says": [], "findings": ["F1"]},
        {"text": "M1 averages 0.99.", "values": [{"metric": "mean", "model": "M1", "value": 0.99}]},
        {"text": "M1 is better than M2.", "says": [{"model": "M1", "vs": "M2", "direction": "better"}]}]})
    run = _run(fake_provider)
    before = (json.dumps(run_to_json(run), sort_keys=True), json.dumps(decisions(run).to_dict(), sort_keys=True))
    fake_provider.script([{"model": "writer", "match": "", "reply": writer_reply}], replace=False)
    with override_settings(EVALSITE_SUMMARY_MODEL="openai:writer"):
        out = tmp_path / "summary.json"
        call_command("summarize", str(run.pk), "--json", str(out))
    asked = fake_provider.requests("writer")
    assert len(asked) == 1
    sent = json.dumps(asked[0]["messages"])
    assert "cand-" not in sent and "openai" not in sent.lower()
    data = json.loads(out.read_text())
    assert data["claims"][0]["ok"] and not data["claims"][1]["ok"]
    assert "F1" in data["summary"] and "0.99" not in data["summary"]
    row = RunInsight.objects.get(run=run)
    assert row.summary_state == "done" and row.input_tokens > 0
    # Leaderboards, verdicts and exports are byte-identical with a summary written.
    run.refresh_from_db()
    after = (json.dumps(run_to_json(run), sort_keys=True), json.dumps(decisions(run).to_dict(), sort_keys=True))
    assert after == before


def test_the_similarity_button_embeds_each_answer_and_the_twins_merge_first(client, fake_provider):
    run = _run(fake_provider)
    with override_settings(EVALSITE_EMBEDDINGS_MODEL="openai:embed"):
        response = client.post(f"/runs/{run.pk}/insight/similarity")
        assert response.status_code == 302
        section = client.get(f"/runs/{run.pk}/insight", HTTP_HX_REQUEST="true").content.decode()
    row = RunInsight.objects.get(run=run)
    assert row.similarity_state == "done", row.similarity_error
    first = row.similarity["merges"][0]
    assert {*first["a"], *first["b"]} == {"openai:cand-good[temp:0]", "openai:cand-twin[temp:0]"}
    assert "<svg" in section and "Cophenetic correlation" in section
    data = insight.findings_json(run)
    assert data["similarity"]["models"] == sorted(f"{m}[temp:0]" for m in MODELS) and "svg" not in data["similarity"]


def test_the_offline_report_opens_with_the_findings_linked_to_its_own_responses(client, fake_provider):
    run = _run(fake_provider)
    report = b"".join(client.get(f"/runs/{run.pk}/report.html").streaming_content).decode()
    assert '<h2 id="findings">Findings</h2>' in report
    section = report[report.index('id="findings"'):report.index('id="heatmap"')]
    assert 'href="#r-' in section and "/runs/" not in section
