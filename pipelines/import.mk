# The decoder and SigLIP models amp ships, made by amp-import from the published
# configurations in share/configs/ (formats/import.md): `make
# import-models` writes them again into IMPORT_DIR (default share/models).
# tests/bats/import.bats checks that the shipped files are exactly what
# it writes. SmolLM2-360M's cache is fp8: at fp16, 32 layers of it leave
# no room on the cache's tiles. Qwen2.5-0.5B's and SmolLM2-360M's tables
# are fp8 as before (--head fp8: the figures of bench/README.md); amp-import
# would choose fp16 for the 1-layer copies, which fit with it.
IMPORT_DIR ?= share/models
.PHONY: import-models
import-models: $(BIN)/amp-import
	@mkdir -p -- "$(IMPORT_DIR)"
	$(BIN)/amp-import --decode --head fp8 share/configs/qwen2.5-0.5b.json -o "$(IMPORT_DIR)/qwen2.5-0.5b-decode.yaml"
	$(BIN)/amp-import --prefill --head fp8 share/configs/qwen2.5-0.5b.json -o "$(IMPORT_DIR)/qwen2.5-0.5b-prefill.yaml"
	$(BIN)/amp-import --decode --head fp8 --layers 1 share/configs/qwen2.5-0.5b.json -o "$(IMPORT_DIR)/qwen2.5-0.5b-1layer-decode.yaml"
	$(BIN)/amp-import --prefill --head fp8 --layers 1 share/configs/qwen2.5-0.5b.json -o "$(IMPORT_DIR)/qwen2.5-0.5b-1layer-prefill.yaml"
	$(BIN)/amp-import --decode --head fp8 --cache fp8 share/configs/smollm2-360m.json -o "$(IMPORT_DIR)/smollm2-360m-decode.yaml"
	$(BIN)/amp-import --prefill --head fp8 --cache fp8 share/configs/smollm2-360m.json -o "$(IMPORT_DIR)/smollm2-360m-prefill.yaml"
	$(BIN)/amp-import --decode --head fp8 --layers 1 --cache fp8 share/configs/smollm2-360m.json -o "$(IMPORT_DIR)/smollm2-360m-1layer-decode.yaml"
	$(BIN)/amp-import --prefill --head fp8 --layers 1 --cache fp8 share/configs/smollm2-360m.json -o "$(IMPORT_DIR)/smollm2-360m-1layer-prefill.yaml"
	$(BIN)/amp-import --decode share/configs/smollm2-135m.json -o "$(IMPORT_DIR)/smollm2-135m-decode.yaml"
	$(BIN)/amp-import --prefill share/configs/smollm2-135m.json -o "$(IMPORT_DIR)/smollm2-135m-prefill.yaml"
	$(BIN)/amp-import --batch 2 share/configs/siglip-so400m.json -o "$(IMPORT_DIR)/siglip-so400m.yaml"
	$(BIN)/amp-import --batch 1 --name siglip-so400m-b1 share/configs/siglip-so400m.json -o "$(IMPORT_DIR)/siglip-so400m-b1.yaml"
	$(BIN)/amp-import --batch 2 --layers 1 share/configs/siglip-so400m.json -o "$(IMPORT_DIR)/siglip-so400m-1layer.yaml"
