"""Click's errors for a name outside a closed set, with capshim's one "did you mean" rule.

Click suggests for a misspelt option on its own terms (case-sensitive, its
own wording) and for a command only among those already loaded (capshim
loads them lazily, so none). Here every misspelt command, option and choice
goes through :func:`capshim.contracts.suggest.did_you_mean`, the rule profile
keys, presets, dimensions and metrics use too:
``No such command 'benhc' (did you mean 'bench'?).``
"""

from __future__ import annotations

import shutil

import click
from click.exceptions import NoSuchCommand, NoSuchOption

from capshim.contracts import messages
from capshim.contracts.suggest import did_you_mean

__all__ = ["Choice", "SuggestingGroup", "VERBOSE", "with_verbose", "option_names", "resuggest", "unknown_option", "refuse_option_as_program"]


def option_names(command: click.Command) -> list[str]:
    """Every option spelling ``command`` takes (``--repetitions``, ``-r``, ``--no-check-output``, ``--help``)."""
    names = [n for p in command.params if isinstance(p, click.Option) for n in (*p.opts, *p.secondary_opts)]
    return names + ["--help", "-h"]


def unknown_option(name: str, command: click.Command, ctx: click.Context | None = None) -> NoSuchOption:
    """The usage error (exit 2) for ``name``, an option ``command`` does not take, with the suggestion."""
    return NoSuchOption(name, message=f"No such option: {name}{did_you_mean(name, option_names(command))}",
                        ctx=ctx)


def refuse_option_as_program(argv: list[str], ctx: click.Context) -> None:
    """For commands that pass unknown options on as the program to run (``bench``, ``run``,
    ``launchagent install``): a program that starts with ``-`` and is not on the PATH is a misspelt
    option of the command (``--repetitons 3``), refused before anything runs, with the suggestion.

    Raises:
        NoSuchOption: (exit 2) naming the option and the closest one the command takes.
    """
    if argv and argv[0].startswith("-") and argv[0] != "--" and shutil.which(argv[0]) is None:
        raise unknown_option(argv[0].partition("=")[0], ctx.command, ctx)


def resuggest(exc: click.UsageError, group: click.Group | None = None,
              ctx: click.Context | None = None) -> click.UsageError:
    """``exc`` with capshim's suggestion in place of click's, for a NoSuchCommand (the names of
    ``group``) or a NoSuchOption (the options of the command it was raised for); others unchanged."""
    if isinstance(exc, NoSuchCommand) and group is not None and not getattr(exc, "_capshim", False):
        name = exc.command_name
        new = NoSuchCommand(name, message=f"No such command {name!r}{did_you_mean(name, group.list_commands(ctx))}.",
                            ctx=exc.ctx)
    elif isinstance(exc, NoSuchOption) and exc.ctx is not None and not getattr(exc, "_capshim", False):
        new = unknown_option(exc.option_name, exc.ctx.command, exc.ctx)
    else:
        return exc
    new._capshim = True  # already rewritten: an outer group leaves it as it is
    return new


VERBOSE = click.Option(
    ["--verbose"], is_flag=True, expose_value=False, is_eager=True,
    callback=lambda _ctx, _param, on: messages.set_verbose(on) if on else None,
    help="List every item of a long list in warnings and notes (default: the first few and a count).")
"""``--verbose``, defined once: ``capshim --verbose CMD`` and ``capshim CMD --verbose`` (any
command, any group) both turn it on (:class:`SuggestingGroup` gives it to every command it loads)."""


def with_verbose(cmd):
    """``cmd`` with :data:`VERBOSE` among its options (once); None stays None."""
    if cmd is not None and not any(p.name == "verbose" for p in cmd.params):
        cmd.params.append(VERBOSE)
    return cmd


class SuggestingGroup(click.Group):
    """A click group whose unknown command or option errors suggest with :func:`resuggest`, and
    whose every command (and the group itself) takes :data:`VERBOSE`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        with_verbose(self)

    def get_command(self, ctx, cmd_name):
        return with_verbose(super().get_command(ctx, cmd_name))

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except NoSuchCommand as exc:
            raise resuggest(exc, self, ctx) from None

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as exc:
            raise resuggest(exc) from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except NoSuchOption as exc:  # a subcommand's own options are parsed inside the group's invoke
            raise resuggest(exc) from None


class Choice(click.Choice):
    """:class:`click.Choice` whose error suggests the closest choice (case-insensitive):
    ``'mdd' is not one of 'md', 'html', 'csv' (did you mean 'md'?).``"""

    def get_invalid_choice_message(self, value, ctx):
        message = super().get_invalid_choice_message(value, ctx)
        return message.rstrip(".") + did_you_mean(str(value), [str(c) for c in self.choices]) + "."
