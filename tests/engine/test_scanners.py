"""Scanners over every answer: refusals, cut-offs, empty answers, language, self-identification, identical answers
and unreadable judge answers, counted per model; notable when frequent or uneven (Fisher's exact test)."""

import pytest
from scipy.stats import fisher_exact

from runs.engine.scanners import Answer, is_refusal, language_of, scan

EN = "Please explain in a few sentences why the sky is blue and what that has to do with the light of the sun."


@pytest.mark.parametrize(("text", "refusal"), [
    ("I'm sorry, but I can't help with that request.", True),
    ("I cannot assist with creating malware.", True),
    ("As an AI language model, I cannot browse the internet.", True),
    ("Sorry, I won't do that.", True),
    ("I can help with that! Here is how it works.", False),
    ("The sky is blue because of Rayleigh scattering; I can't stress enough how pretty it is.", False),
])
def test_refusals_are_read_at_the_start_of_an_answer(text, refusal):
    assert is_refusal(text) is refusal


@pytest.mark.parametrize(("text", "language"), [
    (EN, "en"),
    ("Por favor, explica en pocas frases por qué el cielo es azul y qué tiene que ver con la luz del sol.", "es"),
    ("Bitte erkläre in wenigen Sätzen, warum der Himmel blau ist und was das mit dem Licht der Sonne zu tun hat.", "de"),
    ("空が青いのはなぜですか。太陽の光とどのような関係がありますか。数文で説明してください。よろしくお願いします。", "ja"),
    ("Пожалуйста, объясните в нескольких предложениях, почему небо голубое и как это связано со светом солнца.",
     "cyrillic"),
    ("ok", None),
])
def test_a_language_is_named_only_for_a_text_long_enough_to_say(text, language):
    assert language_of(text) == language


def test_counts_per_model_with_cells_and_the_notable_ones():
    answers = []
    for i in range(20):
        p = f"p{i}"
        answers.append(Answer(p, "refuser", prompt_text=EN,
                              text="I'm sorry, but I can't help with that." if i % 5 == 0 else "Rayleigh scattering."))
        answers.append(Answer(p, "steady", prompt_text=EN, text="Rayleigh scattering, mostly."))
        answers.append(Answer(p, "twin", prompt_text=EN, text="Rayleigh  Scattering, mostly."))
        answers.append(Answer(p, "cut", prompt_text=EN, text="The sky is", output_tokens=64, max_tokens=64,
                              finish_reasons=("length",) if i % 2 else ()))
        answers.append(Answer(p, "boaster", prompt_text=EN, text="As Claude, made by Anthropic, I say: scattering."
                              if i < 3 else "Scattering.", judge_answers=3, judge_unreadable=1 if i < 2 else 0))
    answers.append(Answer("p0", "failed", prompt_text=EN, text=None))
    report = scan(answers)
    refusals = report.counts["refusal"]["refuser"]
    assert (refusals.count, refusals.of) == (4, 20) and refusals.frequent and refusals.notable
    assert refusals.cells[0] == ("p0", "refuser")
    expected_p = fisher_exact([[4, 16], [0, 80]]).pvalue  # the refuser against the other four models
    assert refusals.p_uneven == pytest.approx(expected_p)
    assert report.counts["cut_off"]["cut"].count == 20
    assert report.counts["self_id"]["boaster"].count == 3 and report.counts["self_id"]["steady"].count == 0
    assert report.counts["judge_unreadable"]["boaster"].count == 2
    assert report.counts["judge_unreadable"]["boaster"].of == 60
    assert report.identical_pairs[0][:4] == ("steady", "twin", 20, 20)
    assert "failed" not in report.counts["refusal"]  # a failed generation is not an answer to scan
    assert not report.counts["refusal"]["steady"].notable


def test_a_prompt_that_names_a_vendor_lets_the_answer_name_it():
    answer = Answer("p", "m", prompt_text="What does OpenAI make?", text="OpenAI makes models.")
    assert scan([answer]).counts["self_id"]["m"].count == 0
