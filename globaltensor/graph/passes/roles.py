"""Program -> programs by role (trainers, servers): each role keeps its instructions, and a value
one role makes and another uses crosses by a send and a recv instruction (a peer and a tag)."""
from ..program import Instr
from ..p2p import Recv, Send, link_sends
from ...backends.devices import device


def role_of(roles, rank):
    """The role whose ranks hold `rank` ({role: [ranks]})."""
    for role, ranks in roles.items():
        if rank in ranks:
            return role
    raise ValueError(f"split_by_role: rank {rank} is in no role of {roles}")


def split_by_role(program, roles, assign):
    """{role: program}: each role's program holds the instructions `assign` gives it (a function
    of (position, instruction) -> role, or a list of roles by position); each returns the outputs
    it makes. Then insert_send_recv makes the values that cross roles travel."""
    _check_roles(roles)
    src = program.unplanned()
    by_position = assign if callable(assign) else (lambda i, ins: assign[i])
    owner = []
    for i, ins in enumerate(src.instrs):
        role = by_position(i, ins)
        if role not in roles:
            raise ValueError(f"split_by_role: instruction {i} ({ins.kind} {ins.name}) is given role {role!r}, "
                             f"not one of {sorted(roles)}")
        owner.append(role)
    out = {}
    for role in roles:
        part = src.copy(label=f"{src.label} [{role}]")
        part.instrs = [ins for ins, o in zip(part.instrs, owner) if o == role]
        made = {r for ins in part.instrs for r in ins.outs} | set(part.inputs)
        part.outputs = [r for r in part.outputs if r in made]
        part.roles, part.tree = dict(roles), None
        part.owner = owner
        out[role] = part
    return out


def _check_roles(roles):
    seen = {}
    for role, ranks in roles.items():
        for r in ranks:
            if r in seen:
                raise ValueError(f"split_by_role: rank {r} is in roles {seen[r]!r} and {role!r}")
            seen[r] = role


def insert_send_recv(parts, rank):
    """Rank's program of `parts` (split_by_role's) with a send after each value its role makes
    that another role uses, and a recv where the other role makes a value it uses. Both sides
    place the pair at the producer's position, so every pair of ranks meets its transfers in the
    same order; the tag is the register's index. Peers pair by position in their roles' rank
    lists (or the one rank of a single-rank role)."""
    any_part = next(iter(parts.values()))
    roles, owner = any_part.roles, any_part.owner
    me = role_of(roles, rank)
    mine = parts[me]
    producer_role = {}
    for ins, role in zip(_all_instrs(parts, owner), owner):
        for r in ins.outs:
            producer_role[r] = role
    users = {}
    for ins, role in zip(_all_instrs(parts, owner), owner):
        for r in ins.ins:
            if r in producer_role and producer_role[r] != role:
                users.setdefault(r, set()).add(role)
    instrs, sent, received = [], 0, 0
    kept = {id(ins) for ins in mine.instrs}
    for ins, role in zip(_all_instrs(parts, owner), owner):
        if id(ins) in kept:
            instrs.append(ins)
        for r in ins.outs:
            if r not in users:
                continue
            if role == me:
                for other in sorted(users[r]):
                    for peer in _peers(roles, me, other, rank):
                        instrs.append(Instr("send", "send", Send(peer), [r], [], detail={"peer": peer, "tag": r}))
                        sent += 1
            elif me in users[r]:
                reg = mine.regs[r]
                peers = _peers(roles, me, role, rank)
                if len(peers) != 1:
                    raise ValueError(f"insert_send_recv: register %{r} is made by the {len(peers)} ranks of role "
                                     f"{role!r} and used by one rank of {me!r}; gather it with a collective instead")
                peer = peers[0]
                instrs.append(Instr("recv", "recv", Recv(peer, reg.local_shape, reg.dtype, device(reg.device)), [],
                                    [r], plain=True, detail={"peer": peer, "tag": r}))
                received += 1
    out = mine.copy()
    out.instrs, out.tree, out.owner = link_sends(instrs), None, owner
    out.report = {"insert_send_recv": {"sends": sent, "recvs": received}}
    return out


def _all_instrs(parts, owner):
    """The instructions of every role, in the order of the program they were split from."""
    queues = {role: list(part.instrs) for role, part in parts.items()}
    return [queues[role].pop(0) for role in owner]


def _peers(roles, me, other, rank):
    """The ranks of role `other` that rank (of role `me`) exchanges with."""
    mine, theirs = list(roles[me]), list(roles[other])
    if len(theirs) == 1 or len(mine) == 1:  # one rank to many: the one sends to each, each receives from it
        return theirs
    if len(mine) != len(theirs):
        raise ValueError(f"insert_send_recv: roles {me!r} ({len(mine)} ranks) and {other!r} ({len(theirs)} ranks) "
                         f"pair by position only when their sizes match or one has a single rank")
    return [theirs[mine.index(rank)]]
