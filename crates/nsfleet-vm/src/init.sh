#!/bin/busybox sh
# The guest's first process: mounts the host's root read-only (9p) under a writable
# overlay, runs the command there as root, and reports its exit status to QEMU through
# the isa-debug-exit port (QEMU exits 2n+1). 250: the guest could not be set up.
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /host /scratch /tmp
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
report() {
  printf "$(printf '\\%03o' "$1")" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
  poweroff -f
}
for m in $(cat /modules/order); do
  if [ -f "/modules/$m.ko.xz" ]; then xzcat "/modules/$m.ko.xz" > /tmp/m.ko; else cp "/modules/$m.ko" /tmp/m.ko; fi
  insmod /tmp/m.ko 2>/dev/null
done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 host /host; then
  echo "nsfleet vm: the guest cannot mount the host's filesystem (9p over virtio)"
  report 250
fi
mount -t tmpfs scratch /scratch
mkdir -p /scratch/upper /scratch/work /scratch/root
if ! mount -t overlay overlay -o lowerdir=/host,upperdir=/scratch/upper,workdir=/scratch/work /scratch/root; then
  echo "nsfleet vm: the guest has no overlayfs for its writable scratch"
  report 250
fi
R=/scratch/root
mount -t proc proc $R/proc
mount -t sysfs sys $R/sys
mount -t devtmpfs dev $R/dev
mount -t tmpfs run $R/run
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup 2>/dev/null
cp /command $R/run/nsfleet-vm-command
echo "nsfleet-vm: command starting"
chroot $R /bin/sh /run/nsfleet-vm-command
report $?
