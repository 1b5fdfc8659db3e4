#!/usr/bin/env bash
# foreground.sh runs a command (the console, from `make run` and `make demo`)
# so that Ctrl-C stops it and looks like success.
#
# Why: a terminal's Ctrl-C goes to the whole foreground process group, make
# included, and GNU make, once its recipe has ended, kills itself with the same
# signal: `make demo` would end as interrupted even though the console stopped
# cleanly and exited 0. With job control on, the command runs in a process
# group of its own that `fg` hands the terminal to, so only the command sees
# Ctrl-C; this script, and then make, exit with the command's own status.
# Without a terminal there is no Ctrl-C to take apart: the command simply
# replaces this script.
set -eu
if [ -t 0 ] && [ -t 1 ]; then
	set -m
	"$@" &
	fg %1 >/dev/null
else
	exec "$@"
fi
