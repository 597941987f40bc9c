"""A learning switch as an os-ken application (OpenFlow 1.3), for the tests: `osken-manager
learning_switch.py`. os-ken from the package registry ships no example applications, so
this is the tests' own, the shape of every SDN tutorial's first one: a table-miss flow
to the controller, then a flow per (in port, source, destination) once the destination
is learned. Its flows carry COOKIE, so that a test can tell them in `dump-flows`."""

from typing import Any, Dict, List

from os_ken.base import app_manager  # type: ignore[import-untyped]
from os_ken.controller import ofp_event  # type: ignore[import-untyped]
from os_ken.controller.handler import (  # type: ignore[import-untyped]
    CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls)
from os_ken.lib.packet import ethernet, packet  # type: ignore[import-untyped]
from os_ken.ofproto import ofproto_v1_3  # type: ignore[import-untyped]

COOKIE = 0x05CE1E47


class LearningSwitch(app_manager.OSKenApp):  # type: ignore[misc]
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Per switch (datapath id): the port each MAC was last seen on.
        self.seen: Dict[int, Dict[str, int]] = {}

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)  # type: ignore[misc]
    def connected(self, ev: Any) -> None:
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        to_controller = parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)
        self.add_flow(dp, 0, parser.OFPMatch(), [to_controller])

    def add_flow(self, dp: Any, priority: int, match: Any, actions: List[Any]) -> None:
        ofp, parser = dp.ofproto, dp.ofproto_parser
        apply = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, cookie=COOKIE, priority=priority,
                                      match=match, instructions=apply))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)  # type: ignore[misc]
    def packet_in(self, ev: Any) -> None:
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocol(ethernet.ethernet)
        seen = self.seen.setdefault(dp.id, {})
        seen[eth.src] = in_port
        out = seen.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out)]
        if out != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_src=eth.src, eth_dst=eth.dst)
            self.add_flow(dp, 1, match, actions)
        data = msg.data if msg.buffer_id == ofp.OFP_NO_BUFFER else None
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=msg.buffer_id,
                                        in_port=in_port, actions=actions, data=data))
