"""A launch script or argument file as words, each with the line it was written on.

What a Megatron-LM launch script does, read without running it: the text split into words as
the shell splits it (single and double quotes, backslash escapes, a backslash at a line's
end joining it to the next, ``#`` comments; commands end at a newline, ``;``, ``&&``, ``||``
or ``|``), shell variables set in the file substituted (``NAME=value``, ``export
NAME=value``, arrays ``NAME=( ... )`` and ``NAME+=( ... )``; ``$NAME``, ``${NAME}``,
``${NAME[@]}``, ``${NAME:-default}``; an unquoted ``$NAME`` whose value holds several words
is split into them, as the shell splits it), and the launch command told apart from the
rest: the command that runs a ``.py`` script (``torchrun ... pretrain_gpt.py ...``), its
launcher's words before the script and the script's arguments after it. A file with no such
command is an argument file: every word is an argument.

Not read: command substitution (``$(...)``), arithmetic (``$((...))``), conditionals and
loops; a variable the file does not set stays as written (``$DATA_PATH``), so a flag whose
value needs one is refused by name where its value matters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from atpsim.errors import AtpsimError

_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$", re.S)
_REFERENCE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(\[[@*]\])?(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)
#: Words that end a command (outside quotes).
_SEPARATORS = ("&&", "||", ";", "|", "&")
#: Shell builtins that may precede an assignment.
_DECLARE = ("export", "declare", "local", "readonly")


@dataclass(frozen=True)
class Word:
    """One word of the script, written at *line* (1-based, where it starts). *quoted*: the
    whole word was inside quotes (the shell does not split its expansion). Where it is a
    variable's value, *variable* names the assignment (``HIDDEN_SIZE=12288``) and
    *variable_line* its line."""

    text: str
    line: int
    quoted: bool = False
    variable: str | None = None
    variable_line: int | None = None


@dataclass
class Command:
    """A command of the script: its words (variables substituted)."""

    words: list[Word]

    @property
    def line(self) -> int:
        return self.words[0].line

    @property
    def text(self) -> str:
        return " ".join(w.text for w in self.words)


@dataclass
class Script:
    """A script as :func:`read_script` reads it: the launch command's *launcher* words
    (before the script), *script* (the ``.py`` word; None for an argument file) and its
    *arguments*; the *other* commands (``cd``, ``mkdir``, a second launch)."""

    launcher: list[Word] = field(default_factory=list)
    script: Word | None = None
    arguments: list[Word] = field(default_factory=list)
    other: list[Command] = field(default_factory=list)


def read_script(text: str, source: str) -> Script:
    """The launch command of the shell script or argument file *text* (read from *source*)."""
    commands = _commands(split_words(text, source), source)
    launches = [c for c in commands if _script_index(c) is not None]
    if not launches:
        return Script(arguments=[w for c in commands for w in c.words])
    chosen = next((c for c in launches if _is_pretrain(c)), launches[0])
    index = _script_index(chosen)
    assert index is not None
    return Script(launcher=chosen.words[:index], script=chosen.words[index],
                  arguments=chosen.words[index + 1:],
                  other=[c for c in commands if c is not chosen])  # fmt: skip


def _script_index(command: Command) -> int | None:
    return next((k for k, w in enumerate(command.words) if w.text.endswith(".py")), None)


def _is_pretrain(command: Command) -> bool:
    index = _script_index(command)
    return index is not None and command.words[index].text.rsplit("/", 1)[-1].startswith("pretrain")


def split_words(text: str, source: str) -> list[list[Word]]:
    """The words of each command of *text*, as the shell splits them (module docstring)."""
    lexer = _Lexer(text, source)
    return lexer.commands()


class _Lexer:
    """The shell's word splitting, enough for launch scripts (module docstring)."""

    def __init__(self, text: str, source: str):
        self.text = text.replace("\r\n", "\n")
        self.source = source
        self.at = 0
        self.line = 1

    def commands(self) -> list[list[Word]]:
        commands: list[list[Word]] = []
        current: list[Word] = []
        while self.at < len(self.text):
            char = self.text[self.at]
            if char in " \t":
                self.at += 1
            elif char == "\n" or self._separator():
                if char == "\n":
                    self.at += 1
                    self.line += 1
                if current:
                    commands.append(current)
                current = []
            elif char == "#":
                end = self.text.find("\n", self.at)
                self.at = len(self.text) if end < 0 else end
            elif self.text.startswith("\\\n", self.at):
                self.at += 2
                self.line += 1
            else:
                current.append(self._word())
        if current:
            commands.append(current)
        return commands

    def _separator(self) -> bool:
        """Consume a command separator at the cursor (``;``, ``&&``, ...), if one is there."""
        for separator in _SEPARATORS:
            if self.text.startswith(separator, self.at):
                self.at += len(separator)
                return True
        return False

    def _word(self) -> Word:
        start_line = self.line
        parts: list[str] = []
        unquoted = False
        quoted = False
        while self.at < len(self.text):
            char = self.text[self.at]
            if char in " \t\n" or any(self.text.startswith(s, self.at) for s in _SEPARATORS):
                break
            if char == "\\":
                follower = self.text[self.at + 1:self.at + 2]
                if follower == "\n":
                    self.line += 1
                else:
                    parts.append(follower)
                    unquoted = True
                self.at += 2
            elif char == "'":
                parts.append(self._single_quoted())
                quoted = True
            elif char == '"':
                parts.append(self._double_quoted())
                quoted = True
            else:
                parts.append(char)
                unquoted = True
                self.at += 1
        return Word("".join(parts), start_line, quoted=quoted and not unquoted)

    def _single_quoted(self) -> str:
        end = self.text.find("'", self.at + 1)
        if end < 0:
            self._unclosed("'")
        body = self.text[self.at + 1:end]
        self.line += body.count("\n")
        self.at = end + 1
        return body

    def _double_quoted(self) -> str:
        start_line = self.line
        self.at += 1
        parts: list[str] = []
        while self.at < len(self.text):
            char = self.text[self.at]
            if char == '"':
                self.at += 1
                return "".join(parts)
            if char == "\\" and self.text[self.at + 1:self.at + 2] in ('"', "\\", "$", "`", "\n"):
                follower = self.text[self.at + 1]
                # a backslash-newline inside quotes joins lines; kept as a newline (whitespace
                # between arguments, as the shell would see it) so that lines still count
                parts.append(follower)
                self.line += follower == "\n"
                self.at += 2
                continue
            parts.append(char)
            self.line += char == "\n"
            self.at += 1
        self.line = start_line
        self._unclosed('"')
        return ""

    def _unclosed(self, quote: str) -> None:
        raise AtpsimError(f"a {quote} quote is never closed; expected a closing {quote}",
                          source=f"{self.source}:{self.line}")  # fmt: skip


def _commands(lines: list[list[Word]], source: str) -> list[Command]:
    """The command lines, assignments (scalars and arrays) taken out and substituted."""
    variables: dict[str, list[Word]] = {}
    commands: list[Command] = []
    pending: tuple[str, bool, list[Word]] | None = None  # an array still open
    for words in lines:
        if pending is not None:
            pending, words = _continue_array(pending, words, variables)
            if pending is not None or not words:
                continue
        words = words[1:] if words[0].text in _DECLARE and len(words) > 1 else words
        while words and not words[0].quoted and _ASSIGNMENT.match(words[0].text):
            match = _ASSIGNMENT.match(words[0].text)
            assert match is not None
            name, append, value = match.groups()
            if value.startswith("("):
                first = [Word(value[1:], words[0].line)] if value[1:] else []
                pending, words = _continue_array((name, bool(append), []), first + words[1:],
                                                 variables)  # fmt: skip
                if pending is not None:
                    words = []
                continue
            variables[name] = [_assigned(name, value, words[0], variables)]
            words = words[1:]
        if words:
            commands.append(Command(_expand(words, variables)))
    if pending is not None:
        raise AtpsimError(f"the array {pending[0]}=( is never closed; expected a ')'",
                          source=source)  # fmt: skip
    return commands


def _continue_array(pending: tuple[str, bool, list[Word]], words: list[Word],
                    variables: dict[str, list[Word]]) -> tuple[tuple[str, bool, list[Word]] | None, list[Word]]:  # fmt: skip
    """Add *words* to the open array *pending* up to its ``)``: the array still open (or None,
    then stored in *variables*) and the words after the ``)``."""
    name, append, items = pending
    for k, word in enumerate(words):
        if word.text.endswith(")") and not word.quoted:
            last = word.text[:-1]
            items = items + ([Word(last, word.line)] if last else [])
            expanded = _expand(items, variables)
            variables[name] = (variables.get(name, []) if append else []) + expanded
            return None, words[k + 1:]
        items = items + [word]
    return (name, append, items), []


def _assigned(name: str, value: str, word: Word, variables: dict[str, list[Word]]) -> Word:
    text = _substitute(value, variables)
    return Word(text, word.line, quoted=True, variable=f"{name}={' '.join(text.split())}",
                variable_line=word.line)


def _expand(words: list[Word], variables: dict[str, list[Word]]) -> list[Word]:
    """*words* with variables substituted: a whole-word array reference (``${ARGS[@]}``)
    becomes the array's words; a whole-word scalar (``$HIDDEN``) keeps its assignment, and
    is split into words where it holds several and is not quoted."""
    result: list[Word] = []
    for word in words:
        reference = _REFERENCE.fullmatch(word.text)
        name = (reference.group(1) or reference.group(4)) if reference else None
        if name is not None and name in variables:
            value = variables[name]
            if reference is not None and reference.group(2):  # ${NAME[@]}
                result += value
            elif len(value) == 1 and not (not word.quoted and len(value[0].text.split()) > 1):
                result.append(Word(value[0].text, word.line, word.quoted, value[0].variable,
                                   value[0].variable_line))
            else:
                result += _split(value, word.quoted)
            continue
        result.append(Word(_substitute(word.text, variables), word.line, word.quoted))
    return result


def _split(value: list[Word], quoted: bool) -> list[Word]:
    """A variable's words as an unquoted expansion gives them: each split at whitespace, each
    piece at the line it was written on."""
    if quoted:
        return [Word(" ".join(w.text for w in value), value[0].line, True, value[0].variable)]
    pieces: list[Word] = []
    for item in value:
        line = item.line
        for piece in re.split(r"(\s+)", item.text):
            if piece and not piece.isspace():
                pieces.append(Word(piece, line))
            line += piece.count("\n")
    return pieces


def _substitute(text: str, variables: dict[str, list[Word]]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(4)
        if name in variables:
            return " ".join(w.text for w in variables[name])
        fallback = match.group(3)
        return fallback if fallback is not None else match.group(0)

    return _REFERENCE.sub(value, text)
