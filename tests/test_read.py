import pytest

from pi_memory import Archive
from pi_memory.archive.present import format_read, format_stats
from pi_memory.core.format import READ_CAP, short_id
from pi_memory.errors import BadInput, NotFound

VUE_SID_073 = None


def session_of(archive: Archive, project: str) -> str:
    return str(archive.store.scalar("SELECT id FROM session WHERE project=? ORDER BY id LIMIT 1", (project,)))


def test_read_defaults_to_the_last_messages_of_a_session(imported: Archive):
    sid = session_of(imported, "vue-shop")
    window = imported.read(sid)
    assert len(window.messages) == 5  # 4 before the last one, and the last one
    assert window.before_more and not window.after_more
    seqs = [(m.ts, m.seq) for m in window.messages]
    assert seqs == sorted(seqs)


def test_read_around_a_message_takes_4_before_and_6_after(imported: Archive):
    sid = session_of(imported, "vue-shop")
    ids = [r[0] for r in imported.store.rows("SELECT id FROM msg WHERE session_id=? ORDER BY ts, seq", (sid,))]
    window = imported.read(sid, around=ids[10])
    assert [m.msg_id for m in window.messages] == ids[6:17]


def test_read_accepts_an_8_char_prefix_and_rejects_shorter_or_ambiguous(imported: Archive):
    sid = session_of(imported, "search-svc")
    assert imported.read(sid[:13]).session.id == sid
    with pytest.raises(BadInput, match="too short"):
        imported.read(sid[:5])
    with pytest.raises(BadInput, match="ambiguous"):
        imported.read("01a2364c")  # UUIDv7 sessions made in the same minute share 8 chars
    with pytest.raises(NotFound):
        imported.read("ffffffff-none")


def test_read_accepts_the_short_id_that_listings_show(imported: Archive):
    sid = session_of(imported, "search-svc")
    assert short_id(sid) == sid[-8:]
    assert imported.read(short_id(sid)).session.id == sid


def test_an_ambiguous_session_id_lists_the_candidates_by_short_id(imported: Archive):
    with pytest.raises(BadInput) as raised:
        imported.read("01a2364c")
    message = str(raised.value)
    assert "pick one of:" in message and "\n" not in message
    shorts = {short_id(str(r[0])): r[1] for r in imported.store.rows("SELECT id, project FROM session")}
    listed = [c.split()[:2] for c in message.split("pick one of: ", 1)[1].split("; ")]
    assert len(listed) == 5 and message.endswith("…")  # the newest five, and a sign that there are more
    assert all(shorts[short] == project for short, project in listed)


def test_read_around_a_message_of_another_session_is_an_error(imported: Archive):
    a, b = session_of(imported, "vue-shop"), session_of(imported, "search-svc")
    other = imported.store.scalar("SELECT id FROM msg WHERE session_id=? LIMIT 1", (b,))
    with pytest.raises(NotFound):
        imported.read(a, around=other)


def test_read_output_clips_long_messages_and_caps_the_total(archive: Archive, tmp_path):
    from test_search import write_session

    write_session(tmp_path / "long.jsonl", "longlong-0001", "/w/long", [f"{i} " + "长文本" * 2000 for i in range(12)])
    archive.import_paths([tmp_path / "long.jsonl"])
    window = archive.read("longlong-0001", before=50, after=50, around=archive.store.scalar("SELECT min(id) FROM msg"))
    assert len(window.messages) == 12
    text = format_read(window)
    assert len(text) <= READ_CAP
    assert "[clipped, 4502 more chars]" in text and text.endswith("(output capped; read a narrower window)")
    assert text.startswith("# ") and "longlong-0001" in text


def test_stats_count_messages_sessions_projects_and_roles(imported: Archive):
    st = imported.stats()
    assert st.sessions == 12 and st.messages == 160 and st.projects == 8
    assert st.roles["user"] == sum(1 for _ in imported.store.rows("SELECT 1 FROM msg WHERE role='user'"))
    assert st.db_bytes > 0 and st.oldest <= st.newest
    assert "12 in 8 projects" in format_stats(st)
