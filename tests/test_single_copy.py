"""mpi_impl.single_copy: MPICH's CMA is asked for only where the kernel allows it, and never
against the user's own setting."""
from mpi_impl import single_copy


def test_the_user_s_setting_wins(monkeypatch):
    monkeypatch.setattr(single_copy, "allowed", lambda: True)
    env = {single_copy.VARIABLE: "0"}
    assert single_copy.enable(env) is False and env[single_copy.VARIABLE] == "0"


def test_enabled_where_allowed_and_not_where_forbidden(monkeypatch):
    monkeypatch.setattr(single_copy, "allowed", lambda: True)
    env = {}
    assert single_copy.enable(env) is True and env == {single_copy.VARIABLE: "1"}
    monkeypatch.setattr(single_copy, "allowed", lambda: False)
    env = {}
    assert single_copy.enable(env) is False and env == {}


def test_yama_ptrace_scope_above_zero_forbids_it(tmp_path, monkeypatch):
    scope = tmp_path / "ptrace_scope"
    monkeypatch.setattr(single_copy, "PTRACE_SCOPE", str(scope))
    scope.write_text("1\n")
    assert single_copy.allowed() is False
    scope.write_text("0\n")
    assert single_copy.allowed() is single_copy._process_vm_readv_works()

