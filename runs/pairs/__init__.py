"""The Pairs feature: blind pairwise preferences between model variants and the ratings they add up to.

``scope`` holds what both of its pages share (which responses a pair is drawn from, the next pair, the kept
Bradley-Terry fits, a judgement's fields); ``people`` is the page where people judge; ``llm_judge`` asks an LLM
judge about the same pairs, both ways round, and shows it apart from people's."""
