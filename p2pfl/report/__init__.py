"""What a run leaves for a person: metrics files (`results`), comparison tables (`table`), curves
(`plots`, `figures`) and the labels that tell runs apart (`labels`)."""
