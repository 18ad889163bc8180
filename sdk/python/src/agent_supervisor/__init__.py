"""The agent's side of agent-supervisor: speak to the operator that runs this agent.

```python
from agent_supervisor import Supervisor

with Supervisor.from_env() as sup:          # renews the heartbeat Lease in the background
    start = sup.checkpoint                   # what this attempt resumes from (None: scratch)
    sup.report(progress=120, checkpoint="s3://bucket/run-7/step-120")
    sup.report(spend={"cost": "0.42", "tokens": 18000})
    sup.shutdown("voluntary", "task done")   # typed termination message, exit code 0
```

`AsyncSupervisor` is the asyncio twin (`async with`, awaited calls). Without
`AGENT_HEARTBEAT_LEASE` every call is a no-op, logged once.
"""

from ._async import AsyncSupervisor
from ._env import Outcome
from ._sync import Supervisor

__all__ = ["AsyncSupervisor", "Outcome", "Supervisor"]
__version__ = "0.1.0"
