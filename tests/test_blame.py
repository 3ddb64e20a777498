"""Line blame from edits, as a pure function: replay, hand edits, moved lines, unknown files."""

from __future__ import annotations

from pi_memory.provenance.blame import Event, blame_lines, replay, split_lines
from pi_memory.provenance.extract import DELETE, EDIT, WRITE


def lines(text: str) -> list[str]:
    return split_lines(text)


def test_lines_a_later_edit_left_alone_keep_the_run_that_wrote_them() -> None:
    events = [Event(1, WRITE, new="a\nb\nc\n"), Event(2, EDIT, old="b\n", new="B\nb2\n")]
    assert blame_lines(lines("a\nB\nb2\nc\n"), events) == [1, 2, 2, 1]


def test_a_line_typed_by_hand_is_nobodys_and_so_is_a_changed_one() -> None:
    events = [Event(1, WRITE, new="one\ntwo\nthree\n")]
    assert blame_lines(lines("zero\none\nTWO\nthree\n"), events) == [None, 1, None, 1]


def test_an_edit_inside_a_line_gives_the_whole_line_to_the_edit() -> None:
    events = [Event(1, WRITE, new="x = compute(1)\ny = 2\n"), Event(2, EDIT, old="compute(1)", new="compute(2)")]
    assert blame_lines(lines("x = compute(2)\ny = 2\n"), events) == [2, 1]


def test_multi_line_edits_that_keep_lines_keep_their_writers() -> None:
    events = [
        Event(1, WRITE, new="def f():\n    a = 1\n    return a\n"),
        Event(2, EDIT, old="    a = 1\n    return a\n", new="    a = 1\n    log(a)\n    return a\n"),
    ]
    assert blame_lines(lines("def f():\n    a = 1\n    log(a)\n    return a\n"), events) == [1, 1, 2, 1]


def test_a_replace_all_edit_changes_every_occurrence() -> None:
    events = [Event(1, WRITE, new="foo()\nbar()\nfoo()\n"), Event(2, EDIT, old="foo", new="baz", replace_all=True)]
    assert blame_lines(lines("baz()\nbar()\nbaz()\n"), events) == [2, 1, 2]


def test_of_two_occurrences_the_one_at_the_reported_line_is_edited() -> None:
    events = [Event(1, WRITE, new="x\nsame\ny\nsame\n"), Event(2, EDIT, old="same\n", new="other\n", line=4)]
    assert replay(events) == [("x", 1), ("same", 1), ("y", 1), ("other", 2)]


def test_lines_moved_by_hand_still_resolve_when_their_text_is_unchanged() -> None:
    events = [
        Event(1, WRITE, new="import os  # the os module\nbody()\n"),
        Event(2, EDIT, old="body()\n", new="body()\nmore_work_here()\n"),
    ]
    moved = lines("body()\nmore_work_here()\nimport os  # the os module\n")
    assert blame_lines(moved, events) == [1, 2, 1]


def test_a_short_common_line_that_moved_is_not_guessed() -> None:
    events = [Event(1, WRITE, new="a_long_enough_line()\n}\n")]
    assert blame_lines(lines("}\na_long_enough_line()\n"), events) == [None, 1]


def test_the_file_before_a_change_makes_hand_edits_in_between_nobodys() -> None:
    events = [
        Event(1, WRITE, new="alpha\nbeta\n"),
        # a person added a line by hand; then a session rewrote the file, keeping it
        Event(2, WRITE, new="alpha\nhand line\nbeta\ngamma\n", before="alpha\nhand line\nbeta\n"),
    ]
    assert blame_lines(lines("alpha\nhand line\nbeta\ngamma\n"), events) == [1, None, 1, 2]
    without = [events[0], Event(2, WRITE, new=events[1].new)]
    assert blame_lines(lines("alpha\nhand line\nbeta\ngamma\n"), without) == [1, 2, 1, 2]


def test_an_edit_of_text_changed_by_hand_is_placed_by_its_lines() -> None:
    events = [
        Event(1, WRITE, new="start()\nvalue = 3\nfinish()\n"),
        # by hand, `value = 3` became `value = 5`; then an edit whose old text holds the hand version
        Event(2, EDIT, old="start()\nvalue = 5\n", new="start()\nvalue = 5\nextra_step()\n"),
    ]
    assert blame_lines(lines("start()\nvalue = 5\nextra_step()\nfinish()\n"), events) == [1, None, 2, 1]


def test_an_edit_of_a_file_never_seen_whole_gives_only_its_new_lines() -> None:
    events = [Event(1, EDIT, old="    return x\n", new="    x += 1\n    return x\n", line=3)]
    current = lines("def f(x):\n    '''doc'''\n    x += 1\n    return x\n")
    assert blame_lines(current, events) == [None, None, 1, None]


def test_patch_hunks_match_whole_lines_even_with_trailing_blanks_changed() -> None:
    events = [
        Event(1, WRITE, new="a = 1   \nb = 2\n"),
        Event(2, EDIT, old="a = 1\nb = 2\n", new="a = 1\nb = 3\n", lines=True),
    ]
    assert blame_lines(lines("a = 1\nb = 3\n"), events) == [None, 2]


def test_a_deleted_then_recreated_file_starts_over() -> None:
    events = [Event(1, WRITE, new="old\n"), Event(2, DELETE), Event(3, WRITE, new="old\nnew\n")]
    assert blame_lines(lines("old\nnew\n"), events) == [3, 3]


def test_line_endings_and_a_bom_do_not_matter() -> None:
    events = [Event(1, WRITE, new="a\nb\n")]
    assert blame_lines(lines("\ufeffa\r\nb\r\n"), events) == [1, 1]


def test_an_edit_that_joins_a_line_with_the_next_takes_it_in() -> None:
    events = [Event(1, WRITE, new="x(\n  1\n)\n"), Event(2, EDIT, old="x(\n  1\n", new="x(1")]
    assert replay(events) == [("x(1)", 2)]


def test_a_block_moved_by_hand_keeps_its_writer_through_a_later_snapshot() -> None:
    events = [
        Event(1, WRITE, new="first_line_of_it()\nsecond_line_of_it()\nthird_line_of_it()\nfourth_line_of_it()\n"),
        # a person moved the first two lines to the end; pi saw the file so before its next edit
        Event(2, EDIT, old="fourth_line_of_it()\n", new="fourth_line_of_it()\nfifth()\n",
              before="third_line_of_it()\nfourth_line_of_it()\nfirst_line_of_it()\nsecond_line_of_it()\n"),
    ]  # fmt: skip
    now = lines("third_line_of_it()\nfourth_line_of_it()\nfifth()\nfirst_line_of_it()\nsecond_line_of_it()\n")
    assert blame_lines(now, events) == [1, 1, 2, 1, 1]


def test_a_patch_over_lines_a_person_moved_keeps_their_writers() -> None:
    events = [
        Event(1, WRITE, new="line_one_here()\nline_two_here()\nline_three_here()\nline_four_here()\n"),
        # Codex's hunk holds the file as it really was: line one moved to the end by hand
        Event(2, EDIT, old="line_two_here()\nline_three_here()\nline_four_here()\nline_one_here()\n",
              new="line_two_here()\nline_three_here()\nnew_line_five()\nline_four_here()\nline_one_here()\n", lines=True),
    ]  # fmt: skip
    now = lines("line_two_here()\nline_three_here()\nnew_line_five()\nline_four_here()\nline_one_here()\n")
    assert blame_lines(now, events) == [1, 1, 2, 1, 1]


def test_lines_an_edit_pushed_aside_are_found_where_they_moved() -> None:
    events = [
        Event(1, WRITE, new="alpha_alpha_alpha()\nbeta_beta_beta()\ngamma_gamma_gamma()\n"),
        # the edit's old text shows beta gone from here (a person moved it below gamma)
        Event(2, EDIT, old="alpha_alpha_alpha()\ngamma_gamma_gamma()\n", new="alpha_alpha_alpha()\ndelta_delta()\ngamma_gamma_gamma()\n", lines=True),
    ]  # fmt: skip
    now = lines("alpha_alpha_alpha()\ndelta_delta()\ngamma_gamma_gamma()\nbeta_beta_beta()\n")
    assert blame_lines(now, events) == [1, 2, 1, 1]
