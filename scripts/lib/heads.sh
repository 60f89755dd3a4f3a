# Shared by scripts/heads.sh and scripts/ganesha-heads.sh (sourced, not run): several server
# processes, one per node, each recorded in a pid file $dir/NODE/pid.
#
# The sourcing script defines `log` (a line on stderr) and `alive PIDFILE` (the pid, if that
# process runs and is the server it started).

# Head N's address: HEADS_ADDR_BASE (in $addr_base) + N.
addr_of() { echo "${addr_base%.*}.$((${addr_base##*.} + $1))"; }

# A process whose parent (the script that started it, gone) does not reap it stays a zombie for
# a while after it exited: that is not running (its sockets are closed), so `kill -0` alone
# would mislead.
running() { [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat")" != Z ]; }

# stop_recorded DIR WAIT_S WHAT: stop every process recorded in DIR/*/pid that is alive:
# SIGCONT (a frozen one would not act on SIGTERM), SIGTERM, and SIGKILL if it has not exited
# within WAIT_S seconds (one with a call stuck in libcephfs does not exit on SIGTERM: do not
# leave it running unrecorded). The pid files are removed. WHAT names a node in the log.
stop_recorded() {
    local dir=$1 wait_s=$2 what=$3 p pid
    for p in "$dir"/*/pid; do
        [ -e "$p" ] || continue
        if pid=$(alive "$p"); then
            kill -CONT "$pid"
            kill -TERM "$pid"
            for _ in $(seq $((wait_s * 100))); do running "$pid" || break; sleep 0.01; done
            if running "$pid"; then
                log "$what $(basename "$(dirname "$p")") (pid $pid) did not exit within $wait_s s of SIGTERM; SIGKILL"
                kill -KILL "$pid"
            fi
        fi
        rm -f "$p"
    done
}

# status_recorded DIR: "node address pid up|down" for each process recorded in DIR/*/pid (every
# node listens on port $port of its own address).
status_recorded() {
    local dir=$1 p n pid
    for p in "$dir"/*/pid; do
        [ -e "$p" ] || continue
        n=$(basename "$(dirname "$p")")
        if pid=$(alive "$p"); then echo "$n $(addr_of "$n"):$port $pid up"; else echo "$n $(addr_of "$n"):$port - down"; fi
    done
}
