"""MemoryFunction: the memory data plane — L3 persona (§6), L0 conversation (§7), L1 records (§8)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from memory_hub import persona
from memory_hub.api import envelope, lambda_handler_for, make_app
from memory_hub.edge import current
from memory_hub.schemas import CoreRead, CoreWrite

app = make_app()


@app.post("/v3/core/read", summary="Read the persona (all null when missing)", tags=["L3 core"])
def core_read(req: Annotated[CoreRead, Body(embed=False)]):
    return envelope(persona.read(current().isolation))


@app.post("/v3/core/write", summary="Write the persona exactly as given; 3 backups kept", tags=["L3 core"])
def core_write(req: Annotated[CoreWrite, Body(embed=False)]):
    return envelope(persona.write(current().isolation, req.content))


@app.post("/v3/core/count", summary="1 if a persona exists (even empty), else 0", tags=["L3 core"])
def core_count(req: Annotated[CoreRead, Body(embed=False)]):
    return envelope(persona.count(current().isolation))


lambda_handler = lambda_handler_for(app)
