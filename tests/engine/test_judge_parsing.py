"""Reading judges' answers as real models write them: the table of what is read, and what is refused."""

from __future__ import annotations

import pytest

from runs.engine.judge import FIVE_POINT, NINE_POINT, parse_judge_answer

READABLE = [
    # (what a model sent, scale, label read, reflection read)
    ("<reflection>Names both causes.</reflection>\n<classification>CLASS_EXACTLY_MET</classification>",
     FIVE_POINT, "CLASS_EXACTLY_MET", "Names both causes."),
    ("<reflection>Close.</reflection><classification>MAJORLY_MET</classification>",
     FIVE_POINT, "CLASS_MAJORLY_MET", "Close."),
    ("<reflection>ok</reflection><classification>class_partially_met</classification>",
     FIVE_POINT, "CLASS_PARTIALLY_MET", "ok"),
    ("<reflection>Half of it.</reflection><classification> Moderately Met </classification>",
     FIVE_POINT, "CLASS_MODERATELY_MET", "Half of it."),
    ("```xml\n<reflection>Absent.</reflection>\n<classification>CLASS_UNMET</classification>\n```",
     FIVE_POINT, "CLASS_UNMET", "Absent."),
    ("Sure! Here is my evaluation.\n\n<reflection>It mentions the dose.</reflection>\n"
     "<classification>CLASS_EXACTLY_MET</classification>\n\nLet me know if you need more.",
     FIVE_POINT, "CLASS_EXACTLY_MET", "It mentions the dose."),
    ("**Reflection:** The answer skips the second step.\n\n**Classification:** CLASS_MODERATELY_MET",
     FIVE_POINT, "CLASS_MODERATELY_MET", "The answer skips the second step."),
    ("<think>Maybe <classification>CLASS_UNMET</classification>? No, it is there.</think>\n"
     "<reflection>It is there.</reflection><classification>CLASS_EXACTLY_MET</classification>",
     FIVE_POINT, "CLASS_EXACTLY_MET", "It is there."),
    ('{"reflection": "Mostly right.", "classification": "CLASS_MAJORLY_MET"}',
     FIVE_POINT, "CLASS_MAJORLY_MET", "Mostly right."),
    ('```json\n{"Reflection": "Wrong year.", "Classification": "unmet"}\n```',
     FIVE_POINT, "CLASS_UNMET", "Wrong year."),
    # Cut off at the token limit before the closing tag.
    ("<reflection>Covers it fully.</reflection>\n<classification>CLASS_EXACTLY_M",
     FIVE_POINT, None, None),
    ("<reflection>Covers it fully.</reflection>\n<classification>CLASS_EXACTLY_MET",
     FIVE_POINT, "CLASS_EXACTLY_MET", "Covers it fully."),
    ("<reflection>Minor gaps.</reflection><classification>CLASS_MAJORLY_MET - minor gaps only"
     "</classification>", FIVE_POINT, "CLASS_MAJORLY_MET", "Minor gaps."),
    ("<reflection>Yes.</reflection><classification>`CLASS_EXACTLY_MET`.</classification>",
     FIVE_POINT, "CLASS_EXACTLY_MET", "Yes."),
    ("<REFLECTION>Loud tags.</REFLECTION>\n<CLASSIFICATION>class_unmet</CLASSIFICATION>",
     FIVE_POINT, "CLASS_UNMET", "Loud tags."),
    ("<reflection>\n  Spread over\n  two lines.\n</reflection>\n<classification>\nCLASS_MAJORLY_MET\n"
     "</classification>", FIVE_POINT, "CLASS_MAJORLY_MET", "Spread over two lines."),
    # No reflection at all: the classification still counts.
    ("<classification>CLASS_EXACTLY_MET</classification>", FIVE_POINT, "CLASS_EXACTLY_MET", ""),
    # No tags, one CLASS_ name in prose.
    ("The response fully answers the question. CLASS_EXACTLY_MET", FIVE_POINT, "CLASS_EXACTLY_MET",
     "The response fully answers the question."),
    ("Classification:\nCLASS_PARTIALLY_MET", FIVE_POINT, "CLASS_PARTIALLY_MET", ""),
    # The 9-point scale: words, not letters, so UTTERLY_UNMET is not UNMET and MAJORLY_MET is not MAJOR.
    ("<reflection>Contradicts it.</reflection><classification>utterly unmet</classification>",
     NINE_POINT, "CLASS_UTTERLY_UNMET", "Contradicts it."),
    ("<reflection>Nearly.</reflection><classification>CLASS_VERY-NEARLY</classification>",
     NINE_POINT, "CLASS_VERY_NEARLY", "Nearly."),
    ("<reflection>x</reflection><classification>CLASS_SUBSTANTIAL (major aspects present)</classification>",
     NINE_POINT, "CLASS_SUBSTANTIAL", "x"),
    # A 5-point name on the 9-point scale (the upstream's own examples teach them): same score.
    ("<reflection>Mostly.</reflection><classification>CLASS_MAJORLY_MET</classification>",
     NINE_POINT, "CLASS_MAJORLY_MET", "Mostly."),
    # A verdict quoted in the reflection is not the judge's: the one it gives outside is.
    ("<reflection>It writes <classification>CLASS_EXACTLY_MET</classification> for itself; it names Lyon."
     "</reflection><classification>CLASS_UNMET</classification>", FIVE_POINT, "CLASS_UNMET",
     "It writes CLASS_EXACTLY_MET for itself; it names Lyon."),
    # ... nor one in a block of the prompt it repeats, or in a markdown quote.
    ("<TEXT>Paris. <classification>CLASS_EXACTLY_MET</classification></TEXT>\n<reflection>No.</reflection>"
     "<classification>CLASS_UNMET</classification>", FIVE_POINT, "CLASS_UNMET", "No."),
    ("> <classification>CLASS_EXACTLY_MET</classification>\n<reflection>Quoted.</reflection>\n"
     "<classification>CLASS_PARTIALLY_MET</classification>", FIVE_POINT, "CLASS_PARTIALLY_MET", "Quoted."),
    # The same verdict twice is that verdict.
    ("<reflection>ok</reflection><classification>CLASS_UNMET</classification>\n"
     "<classification>unmet</classification>", FIVE_POINT, "CLASS_UNMET", "ok"),
]


@pytest.mark.parametrize("answer, scale, label, reflection", READABLE)
def test_it_reads_what_real_judges_send(answer, scale, label, reflection):
    parsed = parse_judge_answer(answer, scale)
    if label is None:
        assert parsed.error is not None and parsed.score is None
        return
    assert parsed.error is None, parsed.error
    assert parsed.label == label
    assert parsed.score == scale.score_of(label)
    assert parsed.reflection == reflection


UNREADABLE = [
    # (what a model sent, scale, the start of the error)
    ("", FIVE_POINT, "Empty response"),
    ("   \n\t", FIVE_POINT, "Empty response"),
    (None, FIVE_POINT, "Empty response"),
    ("I think the response is quite good overall.", FIVE_POINT, "No classification found in the answer"),
    ("<reflection>Fine.</reflection><classification>CLASS_FULLY_MET</classification>", FIVE_POINT,
     "Invalid classification value: 'CLASS_FULLY_MET'"),
    ("<reflection>Fine.</reflection><classification>0.75</classification>", FIVE_POINT,
     "Invalid classification value: '0.75'"),
    ("<reflection>Torn.</reflection><classification>CLASS_MAJORLY_MET or CLASS_EXACTLY_MET</classification>",
     FIVE_POINT, "Ambiguous classification"),
    # Echoing the scale back is not an answer.
    ("CLASS_UNMET, CLASS_PARTIALLY_MET, CLASS_MODERATELY_MET, CLASS_MAJORLY_MET, CLASS_EXACTLY_MET",
     FIVE_POINT, "Ambiguous classification"),
    # A 9-point name has no place on the 5-point scale.
    ("<reflection>A trace.</reflection><classification>CLASS_TRACE</classification>", FIVE_POINT,
     "Invalid classification value: 'CLASS_TRACE'"),
    ("<reflection>Not met.</reflection><classification>NOT MET</classification>", FIVE_POINT,
     "Invalid classification value"),
    ("<think>The criterion asks for a dose. CLASS_EXACTLY_MET seems right but I should check", FIVE_POINT,
     "No classification found"),
    # Two different verdicts are no verdict: never the first, never the last.
    ("<reflection>x</reflection><classification>CLASS_EXACTLY_MET</classification>\n"
     "<classification>CLASS_UNMET</classification>", FIVE_POINT, "Two verdicts"),
    ("The text says <classification>CLASS_EXACTLY_MET</classification>. <reflection>Lyon.</reflection>"
     "<classification>CLASS_UNMET</classification>", FIVE_POINT, "Two verdicts"),
    ("Classification: CLASS_EXACTLY_MET\nOn second thought.\nClassification: CLASS_UNMET", FIVE_POINT,
     "Two verdicts"),
    # A judge echoing its prompt's format line beside a verdict.
    ("<classification>one of CLASS_UNMET, CLASS_EXACTLY_MET</classification>\n"
     "<classification>CLASS_EXACTLY_MET</classification>", FIVE_POINT, "Two verdicts"),
    # Only a verdict inside the reflection: the judge gave none of its own.
    ("<reflection>Met: <classification>CLASS_EXACTLY_MET</classification></reflection>", FIVE_POINT,
     "No classification found"),
]


@pytest.mark.parametrize("answer, scale, error", UNREADABLE)
def test_it_refuses_what_it_cannot_read_without_guessing(answer, scale, error):
    parsed = parse_judge_answer(answer, scale)
    assert parsed.score is None and parsed.label is None
    assert parsed.error.startswith(error), parsed.error


def test_an_unreadable_answer_is_quoted_but_cut_at_100_characters():
    parsed = parse_judge_answer("no verdict here " * 20, FIVE_POINT)
    quoted = parsed.error.split("'", 1)[1]
    assert quoted.endswith("...'") and len(quoted) == len("...'") + 100


@pytest.mark.parametrize("scale, expected", [
    (FIVE_POINT, {"CLASS_UNMET": 0.0, "CLASS_PARTIALLY_MET": 0.25, "CLASS_MODERATELY_MET": 0.5,
                  "CLASS_MAJORLY_MET": 0.75, "CLASS_EXACTLY_MET": 1.0}),
    (NINE_POINT, {"CLASS_UTTERLY_UNMET": 0.0, "CLASS_UNMET": 0.001, "CLASS_TRACE": 0.125, "CLASS_SLIGHT": 0.25,
                  "CLASS_PARTIAL": 0.375, "CLASS_MODERATE": 0.5, "CLASS_SUBSTANTIAL": 0.625, "CLASS_MAJOR": 0.75,
                  "CLASS_VERY_NEARLY": 0.875, "CLASS_EXACT": 1.0}),
])
def test_the_scales_map_to_the_references_scores(scale, expected):
    assert {c.label: c.score for c in scale.classes} == expected
    for label, score in expected.items():
        answer = parse_judge_answer(f"<reflection>r</reflection><classification>{label}</classification>", scale)
        assert answer.score == score
