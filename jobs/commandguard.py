"""The command guard: which environment variables a command job may set and
which commands it may run. jobs.handlers.command applies it with the
JOBS_COMMAND_* settings, at save and again before every run; config/settings.py
checks those settings with it. No Django here.

Environment names. A job's `env` may set plain names only (letters, digits
and `_`, not starting with a digit), and only names that
JOBS_COMMAND_ENV_ALLOWED lists (shell patterns, case-sensitive; empty: none).
Whatever that setting says, NEVER_ENV is refused: names that make a program
load or run code other than its own (the dynamic loader, shells, language
runtimes) or run a command the variable names (editors, pagers, askpass
helpers, git). It is built from sudo's env_reset table of unsafe names
(plugins/sudoers/env.c, initial_badenv_table) and glibc's list of names
removed for setuid programs (sysdeps/generic/unsecvars.h), widened from single
names to the families they belong to (PYTHON*, not only PYTHONPATH), plus the
runtimes neither lists (Node, .NET, Lua, PHP, R), build tools and package
managers (a compiler, wrapper, JVM agent or index they run code from),
configuration files that name a credentials command (AWS_CONFIG_FILE,
KUBECONFIG, DOCKER_CONFIG) and Cronboard's own CRONBOARD_* (what the run is,
which a job must not rename). A pattern of the allow-list needs a literal
character: `*` or `?*` would allow every name, including those a later
release adds here. It is compared
case-insensitively, although Linux names are case-sensitive: `ld_preload`
does nothing to glibc, but a lower-case twin of a dangerous name has no use
that would justify the doubt (some programs fold case when they read).

A locale or terminal name (NAME_VALUED_ENV) may not hold `/` or `%`, and TZ
may not be a path, as sudo's env_check has it: the C library would load the
file such a value names.

While JOBS_COMMAND_ALLOWED limits the programs, STEERING_ENV is refused too:
names that choose which program a permitted name runs (PATH) or where
programs read their configuration (HOME, XDG_*), which is code for many of
them (~/.gitconfig's core.pager, ~/.ssh/config's ProxyCommand).

Allowed commands. Each JOBS_COMMAND_ALLOWED entry is a program, a bare name
(run through PATH) or an absolute path, matched exactly, optionally followed
by argument patterns split like a shell would: `find /var/data -name * -delete`.
An entry with arguments matches a command with exactly that many arguments,
each matching its pattern (fnmatch: `*` any text, `/` and `..` included, `?`
one character, `[…]` a set; `[*]` a literal star). A pattern that does not
itself start with `-` never matches an argument that does: `ssh * uptime` must
not allow `ssh -oProxyCommand=… uptime`, nor `sort -o out *` a
`--compress-program=…`; an option is allowed only by a pattern written as one
(`-name`, `--level=*`). An entry with no
arguments allows the program with any arguments, so everything the program
can do: `find -exec`, `bash -c`, `python -c`, `env PROG`.
"""

import fnmatch
import re
import shlex

# Matched whole (fullmatch: `$` would also match before a final newline).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
NAME_RULE = "letters, digits and _, not starting with a digit, at most 255 characters"
ENV_PATTERN = re.compile(r"[A-Za-z0-9_*?\[\]!]+")

NEVER_ENV = (
    # The dynamic loader and the C library (glibc's unsecvars.h, sudo's table).
    "LD_*",
    "DYLD_*",
    "_RLD*",
    "LDR_*",
    "LIBPATH",
    "SHLIB_PATH",
    "GCONV_PATH",
    "GETCONF_DIR",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "LOCPATH",
    "MALLOC_*",
    "NIS_PATH",
    "NLSPATH",
    "PATH_LOCALE",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
    "TZDIR",
    # Shells: start-up files, options, the word splitter, exported functions.
    "ENV",
    "BASH_ENV",
    "BASH_FUNC_*",
    "BASH_LOADABLES_PATH",
    "BASH_XTRACEFD",
    "BASHOPTS",
    "SHELLOPTS",
    "CDPATH",
    "FPATH",
    "GLOBIGNORE",
    "IFS",
    "PS4",
    "PROMPT_COMMAND",
    "NULLCMD",
    "READNULLCMD",
    "TMPPREFIX",
    "ZDOTDIR",
    # Language runtimes: code to load before the program's own.
    "PYTHON*",
    "PERL5*",
    "PERLLIB",
    "PERLIO*",
    "PERLDB*",
    "RUBY*",
    "GEM_*",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "NPM_CONFIG_*",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "DOTNET_STARTUP_HOOKS",
    "DOTNET_ADDITIONAL_DEPS",
    "CORECLR_*",
    "COR_PROFILER*",
    "LUA_INIT*",
    "LUA_PATH*",
    "LUA_CPATH*",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "TCLLIBPATH",
    "R_PROFILE*",
    "R_ENVIRON*",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    # Build tools and package managers: a wrapper, compiler, agent or build
    # script they run, or a file or index that names one.
    "CC",
    "CXX",
    "RUSTC*",
    "RUSTDOC*",
    "RUSTFLAGS",
    "RUSTUP_*",
    "CARGO*",
    "GOFLAGS",
    "GOENV",
    "GOROOT",
    "GOTOOLCHAIN",
    "CGO_*",
    "JAVA_OPTS",
    "MAVEN_OPTS",
    "GRADLE_OPTS",
    "GRADLE_USER_HOME",
    "ANT_OPTS",
    "YARN_*",
    "BUNDLE_*",
    "COMPOSER",
    "PIP_*",
    # Libraries that load plugins from a directory or a file a variable names.
    "KRB5_CONFIG",
    "KRB5_KDC_PROFILE",
    "SASL_PATH",
    "GIO_EXTRA_MODULES",
    "GIO_MODULE_DIR",
    "GTK_MODULES",
    "GTK_PATH",
    "QT_PLUGIN_PATH",
    "GST_PLUGIN_*",
    # Programs that run a command a variable names, or read one from a file or options it names.
    "GIT_*",
    "RSYNC_RSH",
    "RSYNC_CONNECT_PROG",
    "CVS_RSH",
    "TAR_OPTIONS",
    "ZIPOPT",
    "PSQLRC",
    "PSQL_*",
    "MAKEFILES",
    "MAKEFLAGS",
    "MFLAGS",
    "SYSTEMD_PAGER*",
    "SYSTEMD_EDITOR",
    "SSH_ASKPASS*",
    "SUDO_ASKPASS",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "BROWSER",
    "LESS*",
    "TERMINFO*",
    "TERMCAP",
    "TERMPATH",
    "VIMINIT",
    "GVIMINIT",
    "EXINIT",
    "VIMRUNTIME",
    "HGRCPATH",
    "HGEDITOR",
    "SVN_EDITOR",
    "SVN_SSH",
    "GNUPGHOME",
    # Configuration files that name a command to run for credentials (AWS's
    # credential_process, kubeconfig's exec plugin, Docker's credsStore).
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "KUBECONFIG",
    "DOCKER_CONFIG",
    # What the run is: Cronboard sets them, and a job must not pass for another run.
    "CRONBOARD_*",
)

STEERING_ENV = ("PATH", "HOME", "SHELL", "XDG_*")

# Names whose value the C library may take as a path to load (sudo's env_check):
# a locale or terminal name, never a path or a format.
NAME_VALUED_ENV = ("COLORTERM", "LANG", "LANGUAGE", "LC_*", "LINGUAS", "TERM")


def name_shape_refusal(name) -> str | None:
    """Why this is not an environment variable name at all (None: it is one)."""
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        shown = repr(name)[:60] if isinstance(name, str) else type(name).__name__
        return f"{shown} is not an environment variable name ({NAME_RULE})"
    return None


def env_name_refusal(name, *, allowed: list[str], programs_limited: bool) -> str | None:
    """Why a job may not set this environment variable (None: it may)."""
    if shape := name_shape_refusal(name):
        return shape
    upper = name.upper()
    never = next((p for p in NEVER_ENV if fnmatch.fnmatchcase(upper, p)), None)
    if never:
        return f"env may not set {name}: {never} can make a program run other code, and is never allowed"
    if programs_limited and any(fnmatch.fnmatchcase(upper, p) for p in STEERING_ENV):
        return f"env may not set {name} while JOBS_COMMAND_ALLOWED limits the programs"
    if not any(fnmatch.fnmatchcase(name, p) for p in allowed):
        listed = ", ".join(allowed) if allowed else "empty: a job may set no variables"
        return f"env may not set {name}: it is not in JOBS_COMMAND_ENV_ALLOWED ({listed[:300]})"
    return None


def env_value_refusal(name: str, value: str) -> str | None:
    """Why a name the job may set may not have this value (None: it may)."""
    if any(fnmatch.fnmatchcase(name, p) for p in NAME_VALUED_ENV) and ("/" in value or "%" in value):
        return f"env may not set {name} to a value with / or % (a locale or terminal name, not a path)"
    if name == "TZ" and (value.lstrip(":").startswith("/") or ".." in value):
        return "env may not set TZ to a path (give a zone name such as Europe/Berlin)"
    return None


def check_env_patterns(patterns: list[str]) -> None:
    """ValueError naming the first JOBS_COMMAND_ENV_ALLOWED pattern that is
    not a name pattern, that names no literal character (`*`, `?*`, `[A-Z]*`:
    every name, or every name of a shape), or that names a variable NEVER_ENV
    refuses."""
    for pattern in patterns:
        if not ENV_PATTERN.fullmatch(pattern) or pattern[0].isdigit():
            raise ValueError(f"{pattern!r} is not a name pattern (letters, digits, _, * ? [ ] !)")
        if not re.sub(r"\[[^\]]*\]|[*?]", "", pattern):
            which = "any name" if "*" in pattern else "any name of its length"
            raise ValueError(
                f"{pattern} has no literal character, so it allows {which}: "
                "list the names the programs need (PGPASSWORD, BACKUP_*)"
            )
        if not any(c in pattern for c in "*?[") and any(
            fnmatch.fnmatchcase(pattern.upper(), never) for never in NEVER_ENV
        ):
            raise ValueError(f"{pattern} can make a program run other code: a job may never set it")


def split_entries(text: str) -> list[str]:
    """JOBS_COMMAND_ALLOWED's comma-separated entries; a comma inside quotes
    or after a backslash belongs to its entry."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=",")
    lexer.whitespace_split = True
    entries, words = [], []
    try:
        for token in lexer:
            if token and set(token) == {","}:
                if words:
                    entries.append(shlex.join(words))
                words = []
            else:
                words.append(token)
    except ValueError as exc:
        raise ValueError(f"cannot be split into entries: {exc}") from None
    if words:
        entries.append(shlex.join(words))
    return entries


def parse_entry(entry: str) -> list[str]:
    """An entry's words (program first); ValueError if it is not usable."""
    try:
        words = shlex.split(entry)
    except ValueError as exc:
        raise ValueError(f"{entry!r} cannot be split into words: {exc}") from None
    if not words:
        raise ValueError("an entry is empty")
    program = words[0]
    if "/" in program and not program.startswith("/"):
        raise ValueError(f"{program!r}: give a program name or an absolute path")
    if any(c in program for c in "*?["):
        raise ValueError(f"{program!r}: the program is matched exactly, patterns are for its arguments")
    return words


def entry_allows(words: list[str], argv: list[str]) -> bool:
    if argv[0] != words[0]:
        return False
    if len(words) == 1:
        return True
    return len(argv) == len(words) and all(
        argument_matches(arg, pattern) for arg, pattern in zip(argv[1:], words[1:], strict=True)
    )


def argument_matches(arg: str, pattern: str) -> bool:
    """One argument against one pattern; an option only against a pattern
    that is written as one."""
    if arg.startswith("-") and not pattern.startswith("-"):
        return False
    return fnmatch.fnmatchcase(arg, pattern)


def command_refusal(argv: list[str], entries: list[str]) -> str | None:
    """Why JOBS_COMMAND_ALLOWED refuses this argument vector (None: allowed,
    and allowed when the list is empty)."""
    parsed = [parse_entry(entry) for entry in entries]
    if not parsed or any(entry_allows(words, argv) for words in parsed):
        return None
    listed = "; ".join(shlex.join(words) for words in parsed)[:500]
    if any(words[0] == argv[0] for words in parsed):
        return f"“{shlex.join(argv)[:200]}” does not match the arguments JOBS_COMMAND_ALLOWED gives its program ({listed})"
    return f"“{argv[0][:200]}” is not in JOBS_COMMAND_ALLOWED ({listed})"
