from __future__ import annotations

import waypost


def test_all_is_sorted_and_complete() -> None:
    assert waypost.__all__ == sorted(waypost.__all__)
    for name in waypost.__all__:
        assert hasattr(waypost, name), name
    public = {n for n in vars(waypost) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(waypost, n)).__name__ == "module"}
    assert public - modules == set(waypost.__all__)


def test_library_round_trip(tmp_path: object) -> None:
    store = waypost.open_store(f"{tmp_path}/lib.db")
    with store:
        run, created = waypost.start(store, "lib", actor="alice", owner="alice",
                                     target="none:", kind=waypost.Kind.LONG_RUNNING,
                                     max_silence=60)
        assert created
        worker = waypost.Run(store, run.id, actor="w1")
        assert worker.claim().worker is not None
        assert worker.epoch == 1
        packet, blocker = worker.block(waypost.BlockerKind.MISSING_INPUT, "the schema file")
        assert packet.state is waypost.State.BLOCKED
        owner = waypost.Run(store, run.id, actor="alice")  # only the owner gives the input
        assert owner.unblock(blocker, "schema.json added").state is waypost.State.IN_PROGRESS
        assert waypost.fold(store.events(run.id)) == store.get(run.id)


def test_each_public_name_is_loaded_from_where_type_checkers_are_told_it_lives() -> None:
    """`waypost/__init__.py` names each public name three times: imported for type
    checkers, in `_HOMES` (where `__getattr__` loads it from) and in `__all__`."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(waypost))
    checked = next(node for node in tree.body if isinstance(node, ast.If)
                   and ast.unparse(node.test) == "typing.TYPE_CHECKING")
    declared = {alias.name: node.module for node in checked.body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert declared == waypost._HOME_OF
    assert sorted(declared) == waypost.__all__
