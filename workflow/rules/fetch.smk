# Downloads planned when a cell's dataset (or torchvision checkpoint) is absent and the network is reachable
# (benchmark/tables/availability.py): `flb data fetch` verifies the official checksums before anything is
# extracted and writes the verified identity here; offline, such cells are NOT RUN with that command.
rule fetch_data:
    output: "results/data/{dataset}.json"
    log: "results/logs/data/{dataset}.log"
    wildcard_constraints:
        dataset=r"[a-z0-9_]+",
    params:
        root=f"--data-root {wf.shell_word(config['data_root'])}" if config.get("data_root") else "",
        data=DATA,  # a new data root fetches again (params rerun trigger)
    shell: "{PY} data fetch {wildcards.dataset} {params.root} --marker {output} 2> {log}"


rule fetch_weights:
    output: "results/data/weights/{model}.json"
    log: "results/logs/data/weights/{model}.log"
    params:
        where=lambda w: str(wf.hub_dir()),
    shell: "{PY} data fetch --weights {wildcards.model} --marker {output} 2> {log}"
