"""What runs inside the OS sandbox (tools/sandbox/bubblewrap.py), and only that: the one
folder of tools/ a sandbox mounts (bubblewrap.INSIDE). It imports nothing of tools/ outside
this folder (tests/test_layout.py), so that what student code runs beside is all here to
read.

    runner         the process that runs the submission's code, for the judge
    peer, wire     the channel between the judge and the runner: requests, handles, values
    remote         the proxy of an object of the other side
    torch_proxies  the torch side of the channel (an autograd node, a module's proxy)
    guard          resource limits and an audit hook, the second wall (the runner's and a
                   grading kernel's first code)
    limits         what one submission may use: one typed object, from the course's config

The judge (tools/judge/) and the head import the channel's end and the limits from here.
"""
