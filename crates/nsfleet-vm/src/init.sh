#!/bin/busybox sh
# The guest's first process: mounts the host's root read-only (9p) under a writable
# overlay, mounts the --rwdir folders writable at their own paths, runs the command there
# as root, and writes its exit status into the run's own share (/run.nsfleet/status):
# "started" just before the command, "exit N" after it, "setup: WHY" if the guest could
# not be set up. It then stops QEMU at once through the isa-debug-exit port (or powers
# off, on a kernel without /dev/port).
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /host /scratch /tmp /run.nsfleet
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# The loopback, up as on any machine: what listens on 127.0.0.1 (an OpenFlow controller
# a switch's relay connects to) is otherwise unreachable.
ip link set lo up
# The host's watchdog waits for this: the guest runs (a KVM that hangs never gets here).
echo alive > /dev/ttyS1 2>/dev/null
stop() {
  printf '\001' | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
  poweroff -f
}
setup_failed() {
  echo "nsfleet vm: $1"
  echo "setup: $1" > /run.nsfleet/status
  stop
}
for m in $(cat /modules/order); do
  if [ -f "/modules/$m.ko.xz" ]; then xzcat "/modules/$m.ko.xz" > /tmp/m.ko; else cp "/modules/$m.ko" /tmp/m.ko; fi
  insmod /tmp/m.ko 2>/dev/null
done
# Without the run's share nothing can be reported but this line.
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 run /run.nsfleet 2>/dev/null; then
  echo "nsfleet vm: the guest cannot mount the host's filesystem (9p over virtio: CONFIG_VIRTIO_PCI, CONFIG_NET_9P_VIRTIO and CONFIG_9P_FS)"
  stop
fi
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 host /host; then
  setup_failed "the guest cannot mount the host's root filesystem (9p over virtio)"
fi
mount -t tmpfs scratch /scratch
mkdir -p /scratch/upper /scratch/work /scratch/root
if ! mount -t overlay overlay -o lowerdir=/host,upperdir=/scratch/upper,workdir=/scratch/work /scratch/root; then
  setup_failed "the guest has no overlayfs for its writable scratch (CONFIG_OVERLAY_FS)"
fi
R=/scratch/root
mount -t proc proc $R/proc
mount -t sysfs sys $R/sys
mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/pts $R/dev/shm
# What udev makes on any machine (bash's process substitution opens /dev/fd/N).
ln -s /proc/self/fd $R/dev/fd
for s in stdin:0 stdout:1 stderr:2; do ln -s "/proc/self/fd/${s#*:}" "$R/dev/${s%:*}"; done
mount -t devpts -o ptmxmode=0666 devpts $R/dev/pts
mount -t tmpfs shm $R/dev/shm
mount -t tmpfs run $R/run
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup 2>/dev/null
while read -r tag dir; do
  mkdir -p "$R$dir"
  if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 "$tag" "$R$dir"; then
    setup_failed "the guest cannot mount --rwdir $dir"
  fi
done < /rwdirs
[ -f /config ] && mkdir -p $R/boot && cp /config "$R/boot/config-$(uname -r)"
cp /command $R/run/nsfleet-vm-command
echo started > /run.nsfleet/status
# The overlay becomes the mount namespace's root (as switch_root makes it), not only the
# command's: a process that enters the namespace (setns, as nsfleet's process spawner
# does for a node's world) lands on the namespace's root, which a chroot alone leaves on
# the initramfs, where none of the guest's files are. This shell keeps the initramfs as
# its own root, so its paths (/run.nsfleet, /dev/port) stay as they were.
cd $R
mount --move . / || setup_failed "the guest cannot make its overlay the root mount (mount --move)"
chroot . /bin/sh /run/nsfleet-vm-command
echo "exit $?" > /run.nsfleet/status
stop
