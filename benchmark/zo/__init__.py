"""Zeroth-order federated fine-tuning (bernier2024 ch. 4): MeZO, FedMeZO, DistMeZO, and the SLoRA baseline."""
