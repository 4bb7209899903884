"""What a campaign worker paid to detect the platform itself, against loading the supervisor's platform.json.

    python3 results/cpu-2026-12-02-s16/detect-platform.py OUT.json   (several at once: the contended cost)
"""
import time, sys
t=time.time()
from hybridfuzz.strategies import detect_platform
p=detect_platform()
t1=time.time()
open(sys.argv[1],'w').write(p.to_json())
from hybridfuzz.strategies.platform import Platform
t2=time.time(); q=Platform.from_json(open(sys.argv[1]).read()); t3=time.time()
print(f"detect_platform (with imports) {t1-t:.1f} s; from_json {1000*(t3-t2):.1f} ms; equal {p==q}")
