"""The applications are ``flb`` subcommands (benchmark.apps): listed in ``flb --help``, handed their own
arguments, and their old ``benchmark.fl.*`` names still resolve to the moved modules."""

from __future__ import annotations

import pytest

from benchmark import apps, cli


def test_flb_help_lists_every_application(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in apps.APPS)


@pytest.mark.parametrize("name", sorted(apps.APPS))
def test_each_application_parses_its_own_arguments(name, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main([name, "--help"])
    assert exc.value.code == 0
    assert f"usage: flb {name}" in capsys.readouterr().out


def test_flb_plot_runs_the_plot_application(tmp_path, capsys) -> None:
    rc = cli.main(["plot", f"A={tmp_path / 'missing.csv'}", "--out", str(tmp_path / "fig.png")])
    assert rc == 2 and "curve file(s) not found" in capsys.readouterr().err
    assert not (tmp_path / "fig.png").exists()
