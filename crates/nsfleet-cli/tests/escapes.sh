# What a hostile node tries that would reach the machine beyond it, each as one line for
# busybox's sh: the entrypoint of the hostile image of tests/images.rs, and what
# scripts/escape-table runs in nsfleet's nodes and Docker's containers. Prints
# "NAME: refused: WHAT IT SAID" or "NAME: MADE: ..." for each, then "done". Where one
# succeeds (a privileged container) it changes nothing that lasts: a sysctl is written
# its own value, the clock is set to what it says, a swap file is swapped off again.
try() {
    name=$1; shift
    if out=$(sh -c "$*" 2>&1); then echo "$name: MADE: $out"; else echo "$name: refused: $out"; fi
}
cd /tmp
try mknod 'mknod /tmp/disk b 8 0'
try debugfs 'mkdir -p /tmp/d && mount -t debugfs none /tmp/d'
try sysctl 'f=/proc/sys/kernel/printk_ratelimit; v=$(cat $f) && echo $v > $f'
try module 'dd if=/dev/zero of=/tmp/m.ko bs=1024 count=4 2>/dev/null && insmod /tmp/m.ko'
# busybox's date says its refusal and exits 0: its words are what tell.
try clock 'out=$(date -s "$(date "+%Y-%m-%d %H:%M:%S")" 2>&1); echo "$out"; case $out in *"can'"'"'t"*) false;; esac'
try swap 'dd if=/dev/zero of=/tmp/swap bs=1024 count=64 2>/dev/null && mkswap /tmp/swap >/dev/null && swapon /tmp/swap && swapoff /tmp/swap'
try 'kernel log' 'dmesg > /tmp/log && head -1 /tmp/log'
try "init's environment" 'cat /proc/1/environ'
try 'host disk' 'head -c1 /dev/sda >/dev/null'
try memory 'head -c1 /dev/mem >/dev/null'
try 'timer list' 'test -s /proc/timer_list && head -1 /proc/timer_list'
try firmware 'ls /sys/firmware | grep -q . && ls /sys/firmware'
# Last: where it is allowed, it ends the node's PID namespace, this script with it.
try reboot 'reboot -f'
echo done
