"""The rig's storage host: serves a directory over SFTP on a TCP port, without
sshd (sshfs -o directport=PORT speaks SFTP straight to it), so that the pool's
hosts mount /fsx as users mount NFS. One sftp-server per connection, as root.

    python3 sftp_serve.py ADDRESS PORT
"""
import signal
import socket
import subprocess
import sys

SFTP_SERVER = "/usr/lib/openssh/sftp-server"  # openssh-sftp-server


def main():
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # reap finished sessions
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], int(sys.argv[2])))
    s.listen(64)
    print("serving sftp on %s:%s" % (sys.argv[1], sys.argv[2]), flush=True)
    while True:
        conn, _ = s.accept()
        subprocess.Popen([SFTP_SERVER], stdin=conn.fileno(), stdout=conn.fileno(),
                         close_fds=True)
        conn.close()


if __name__ == "__main__":
    main()
