"""The memory bench's pure parts: which LoCoMo turns it stores (cycled as new users past the data
set's end), where it cuts the warm-up, and the growth it reports (no stack, no processes)."""

from __future__ import annotations

from memory_hub_bench.datasets import load_locomo
from memory_hub_bench.memory import KINDS, Growth, Sample, split, turns


def _locomo_turns() -> int:
    return sum(len(corpus.turns) for corpus in load_locomo().corpora)


def test_past_the_data_set_s_end_its_conversations_come_again_as_new_users():
    available = _locomo_turns()
    taken = turns(available + 500)
    assert sum(len(conversation) for _, conversation in taken) == available + 500
    assert len({scope.user for scope, _ in taken}) == len(taken)  # every conversation a user of its own
    first_text = [t.content for t in taken[0][1][:5]]
    again = [c for _, c in taken if [t.content for t in c[:5]] == first_text]
    assert len(again) == 2  # the first conversation, stored again (as someone else)


def test_fewer_turns_than_a_conversation_are_cut_from_its_start():
    taken = turns(10)
    assert len(taken) == 1 and len(taken[0][1]) == 10


def test_the_warm_up_cut_keeps_order_and_a_cut_conversation_its_user():
    taken = turns(1000)
    head, tail = split(taken, 150)
    assert sum(len(c) for _, c in head) == 150
    assert [t for _, c in head for t in c] + [t for _, c in tail for t in c] == [t for _, c in taken for t in c]
    assert head[-1][0] == tail[0][0]  # the conversation cut in two is one user on both sides


def _sample(messages: int, aws: float, functions: float) -> Sample:
    return Sample(messages, dict(zip(KINDS, (aws, functions), strict=True)), dict.fromkeys(KINDS, 1))


def test_growth_per_thousand_counts_only_what_came_after_the_warm_up():
    growth = Growth(_sample(0, 240, 390), _sample(200, 290, 414), _sample(2200, 310, 416), seconds=60)
    assert growth.first_use() == 74
    assert growth.per_thousand("emulated AWS") == 10
    assert growth.per_thousand("functions") == 1
    assert growth.per_thousand() == 11


def test_the_proportional_set_counts_a_page_mapped_by_two_processes_half_in_each():
    """A page shared after a fork is in both processes' RSS, and half of it in each one's PSS."""
    import mmap
    import os
    import signal

    from memory_hub_bench.memory import pss_kib, rss_kib

    size = 64 * 1024 * 1024
    shared = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
    shared.write(b"x" * size)  # touched: resident in this process
    alone = pss_kib(os.getpid())
    child = os.fork()
    if child == 0:  # maps the same pages and waits to be killed
        signal.pause()
        os._exit(0)
    try:
        both = pss_kib(os.getpid())
        assert rss_kib(os.getpid()) > size // 1024  # RSS counts the whole mapping here …
        assert alone - both > 0.4 * size // 1024  # … PSS only half of it once the child maps it too
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        shared.close()
    assert pss_kib(child) == 0  # gone


def test_the_whole_stack_s_proportional_growth_counts_after_the_warm_up():
    start, warmed, end = (_sample(m, 0, 0) for m in (0, 200, 2200))
    for sample, pss in ((start, 500.0), (warmed, 560.0), (end, 580.0)):
        sample.pss_mib = dict(zip(KINDS, (pss, 0.0), strict=True))
    assert Growth(start, warmed, end, seconds=60).per_thousand_pss() == 10
